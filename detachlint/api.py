"""The one call every front end makes: paths and options in, findings out."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Type

from detachlint.config import Config, Selection, enabled_codes, expand, find_config_file, load_config
from detachlint.discovery import Target, discover, matches
from detachlint.engine import PARSE_ERROR_CODE, FileResult, lint_source
from detachlint.errors import UsageError
from detachlint.finding import Finding
from detachlint.registry import load_rules
from detachlint.rule import Rule


@dataclass(frozen=True)
class CheckOptions:
    selection: Selection = Selection()
    config_file: Optional[Path] = None
    stdin: Optional[bytes] = None  # the text of `-`
    stdin_filename: Optional[str] = None


@dataclass
class RunResult:
    findings: List[Finding] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)  # unreadable paths, internal errors
    files: int = 0


@dataclass(frozen=True)
class Setup:
    """Everything decided before the first file is read."""

    config: Config
    rules: Dict[str, Type[Rule]]
    enabled: frozenset


def prepare(paths: Sequence[str], options: CheckOptions) -> Setup:
    if options.config_file is not None:
        if not options.config_file.is_file():
            raise UsageError(f"config file not found: {options.config_file}")
        config = load_config(options.config_file)
    else:
        anchor = next((p for p in paths if p != "-"), None)
        if anchor is None and options.stdin_filename:
            anchor = options.stdin_filename
        start = Path(anchor) if anchor else Path.cwd()
        if not start.exists():
            start = Path.cwd()
        config = load_config(find_config_file(start))
    rules = load_rules(config.rule_paths)
    codes = list(rules)
    default = [code for code, rule in rules.items() if rule.default_enabled]
    enabled = enabled_codes([config.selection, options.selection], codes, default)
    for glob, ignored in config.per_file_ignores.items():
        expand(ignored, codes + [PARSE_ERROR_CODE], str(config.path), f"per-file-ignores[{glob!r}]")
    return Setup(config, rules, frozenset(enabled))


def rules_for(target_path: Path, setup: Setup) -> List[Type[Rule]]:
    codes = set(setup.enabled)
    for glob, ignored in setup.config.per_file_ignores.items():
        if matches([glob], target_path, setup.config.root):
            codes -= expand(ignored, list(setup.rules) + [PARSE_ERROR_CODE], "", "")
    return [setup.rules[code] for code in sorted(codes) if code in setup.rules]


def _parse_errors_ignored(target_path: Path, setup: Setup) -> bool:
    for glob, ignored in setup.config.per_file_ignores.items():
        if matches([glob], target_path, setup.config.root) and PARSE_ERROR_CODE in expand(
            ignored, list(setup.rules) + [PARSE_ERROR_CODE], "", ""
        ):
            return True
    return False


def lint_target(display: str, path: Path, source: bytes, setup: Setup) -> FileResult:
    result = lint_source(source, display, rules_for(path, setup))
    if _parse_errors_ignored(path, setup):
        result.findings = [f for f in result.findings if f.code != PARSE_ERROR_CODE]
    return result


def check(paths: Sequence[str], options: CheckOptions = CheckOptions()) -> RunResult:
    """Lint `paths` (`-` is stdin) and return every finding, sorted."""
    setup = prepare(paths, options)
    run = RunResult()
    file_paths = [p for p in paths if p != "-"]
    targets, run.errors = discover(file_paths, setup.config)
    if "-" in paths:
        display = options.stdin_filename or "-"
        result = lint_target(display, Path(display), options.stdin or b"", setup)
        run.findings.extend(result.findings)
        run.errors.extend(result.errors)
        run.files += 1
    for target in targets:
        try:
            source = target.path.read_bytes()
        except OSError as error:
            run.errors.append(f"{target.display}: cannot read: {error.strerror or error}")
            continue
        result = lint_target(target.display, target.path, source, setup)
        run.findings.extend(result.findings)
        run.errors.extend(result.errors)
        run.files += 1
    run.findings.sort()
    return run
