"""`[tool.detachlint]` in pyproject.toml, or a `detachlint.toml`.

The file is found from the linted paths upward; the first `detachlint.toml`,
or `pyproject.toml` with a `[tool.detachlint]` table, wins. Paths in it
(`rule-paths`, `exclude`, `per-file-ignores` globs) are relative to the
folder that holds it. Every key and value is checked: a mistake is one line
naming the key and the file.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from detachlint.errors import UsageError
from detachlint.rule import SEVERITIES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on older interpreters only
    import tomli as tomllib

DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".bzr", ".venv", "venv", ".tox", ".nox", "__pycache__",
    "build", "dist", "node_modules", ".mypy_cache", ".pytest_cache", ".ruff_cache",
    ".detachlint_cache", ".eggs", "*.egg-info", "site-packages", "__pypackages__",
)

_LIST_KEYS = ("select", "ignore", "extend-select", "exclude", "extend-exclude", "rule-paths")
_KEYS = _LIST_KEYS + ("per-file-ignores", "severity", "max-file-kb", "max-file-seconds")
# The per-file budget: a file larger, or slower to analyse, is skipped with a
# warning while the run goes on (a pre-commit hook must not stall on one
# machine-made file). Hand-written files, even torch's largest, are far below.
DEFAULT_MAX_FILE_KB = 1024
DEFAULT_MAX_FILE_SECONDS = 20.0


@dataclass(frozen=True)
class Selection:
    """One layer of rule selection: the file's, then the command line's."""

    select: Optional[Sequence[str]] = None
    extend_select: Sequence[str] = ()
    ignore: Sequence[str] = ()
    origin: str = "the command line"


@dataclass(frozen=True)
class Config:
    path: Optional[Path] = None  # the file it came from, if any
    root: Path = field(default_factory=Path.cwd)
    selection: Selection = Selection(origin="defaults")
    per_file_ignores: Dict[str, List[str]] = field(default_factory=dict)
    # Rule code -> the severity its findings get instead of their harm's.
    severity: Dict[str, str] = field(default_factory=dict)
    exclude: Sequence[str] = DEFAULT_EXCLUDE
    user_exclude: Sequence[str] = ()  # patterns the user wrote: apply to explicit files too
    rule_paths: Sequence[Path] = ()
    max_file_kb: int = DEFAULT_MAX_FILE_KB
    max_file_seconds: float = DEFAULT_MAX_FILE_SECONDS

    @property
    def label(self) -> str:
        return str(self.path) if self.path else "defaults"


def find_config_file(start: Path) -> Optional[Path]:
    start = start.resolve()
    folder = start if start.is_dir() else start.parent
    for candidate in [folder, *folder.parents]:
        own = candidate / "detachlint.toml"
        if own.is_file():
            return own
        pyproject = candidate / "pyproject.toml"
        if pyproject.is_file() and _has_table(pyproject):
            return pyproject
    return None


def _has_table(pyproject: Path) -> bool:
    try:
        text = pyproject.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    if "detachlint" not in text:
        return False
    data = _read_toml(pyproject)
    return isinstance(data.get("tool"), dict) and "detachlint" in data["tool"]


def _read_toml(path: Path) -> Dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except OSError as error:
        raise UsageError(f"{path}: cannot read config: {error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise UsageError(f"{path}: not valid TOML: {error}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not valid TOML: the file is not UTF-8") from None


def load_config(path: Optional[Path]) -> Config:
    """The config in `path` (None: defaults, rooted at the current folder)."""
    if path is None:
        return Config()
    data = _read_toml(path)
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("detachlint", {}) if isinstance(data.get("tool"), dict) else {}
        prefix = "tool.detachlint."
    else:
        table = data
        prefix = ""
    if not isinstance(table, dict):
        raise UsageError(f"{path}: `{prefix.rstrip('.') or 'detachlint'}` must be a table")
    for key in table:
        if key not in _KEYS:
            known = ", ".join(_KEYS)
            raise UsageError(f"{path}: unknown key `{prefix}{key}` (known keys: {known})")
    for key in _LIST_KEYS:
        if key in table:
            value = table[key]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise UsageError(f"{path}: `{prefix}{key}` must be a list of strings, got {value!r}")
    per_file = table.get("per-file-ignores", {})
    if not isinstance(per_file, dict) or not all(
        isinstance(v, list) and all(isinstance(c, str) for c in v) for v in per_file.values()
    ):
        raise UsageError(
            f"{path}: `{prefix}per-file-ignores` must map globs to lists of rule codes, got {per_file!r}"
        )
    severity = table.get("severity", {})
    if not isinstance(severity, dict) or not all(isinstance(v, str) and v in SEVERITIES for v in severity.values()):
        raise UsageError(
            f"{path}: `{prefix}severity` must map rule codes to one of {', '.join(SEVERITIES)}, got {severity!r}"
        )
    budget = {}
    for key, kind in (("max-file-kb", int), ("max-file-seconds", (int, float))):
        if key in table:
            value = table[key]
            if isinstance(value, bool) or not isinstance(value, kind) or value <= 0:
                raise UsageError(f"{path}: `{prefix}{key}` must be a positive number, got {value!r}")
            budget[key.replace("-", "_")] = value
    root = path.parent.resolve()
    user_exclude = list(table.get("exclude", [])) + list(table.get("extend-exclude", []))
    exclude = list(table["exclude"]) if "exclude" in table else list(DEFAULT_EXCLUDE)
    exclude += table.get("extend-exclude", [])
    rule_paths = []
    for entry in table.get("rule-paths", []):
        folder = (root / entry).resolve()
        if not folder.is_dir():
            raise UsageError(f"{path}: `{prefix}rule-paths` names {entry!r}, which is not a folder")
        rule_paths.append(folder)
    return Config(
        path=path,
        root=root,
        selection=Selection(
            select=table.get("select"),
            extend_select=table.get("extend-select", ()),
            ignore=table.get("ignore", ()),
            origin=str(path),
        ),
        per_file_ignores={glob: [c.upper() for c in codes] for glob, codes in per_file.items()},
        severity={code.upper(): level for code, level in severity.items()},
        exclude=tuple(exclude),
        user_exclude=tuple(user_exclude),
        rule_paths=tuple(rule_paths),
        **budget,
    )


def expand(selectors: Sequence[str], codes: Sequence[str], origin: str, option: str, lenient: bool = False) -> set:
    """Codes matched by `ALL`, full codes or prefixes such as `DL1`;
    `lenient`: a selector that matches nothing is passed over."""
    chosen = set()
    for selector in selectors:
        selector = selector.strip().upper()
        if not selector:
            continue
        if selector == "ALL":
            chosen.update(codes)
            continue
        matched = [code for code in codes if code.startswith(selector)]
        if not matched and not lenient:
            raise UsageError(f"{origin}: unknown rule code or prefix `{selector}` in {option}")
        chosen.update(matched)
    return chosen


def enabled_codes(layers: Sequence[Selection], codes: Sequence[str], default: Sequence[str], lenient: Optional[str] = None) -> set:
    """Apply each layer in turn: a later layer (the command line) beats an
    earlier one. Unknown codes from the layer of origin `lenient` pass."""
    enabled = set(default)
    for layer in layers:
        easy = layer.origin == lenient
        if layer.select is not None:
            enabled = expand(layer.select, codes, layer.origin, "select", easy)
        enabled |= expand(layer.extend_select, codes, layer.origin, "extend-select", easy)
        enabled -= expand(layer.ignore, codes, layer.origin, "ignore", easy)
    return enabled
