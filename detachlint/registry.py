"""Loads rules from folders: the built-in `rules/` and a user's `rule-paths`.

Both go through the same loader. Rule files are imported under a private
package name, so neither the source tree nor an installed wheel needs a
top-level package called `rules`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
from pathlib import Path
from typing import Dict, Iterable, List, Type

from detachlint.errors import UsageError
from detachlint.rule import Rule

_CODE = re.compile(r"[A-Z]{1,6}[0-9]{2,4}")
_PRIVATE_PACKAGE = "detachlint._loaded_rules"


def builtin_rules_dir() -> Path:
    package = Path(__file__).resolve().parent
    installed = package / "_builtin_rules"  # where a wheel puts them
    return installed if installed.is_dir() else package.parent / "rules"


def _load_file(path: Path) -> List[Type[Rule]]:
    digest = hashlib.sha1(str(path.parent).encode()).hexdigest()[:8]
    module_name = f"{_PRIVATE_PACKAGE}.r{digest}_{path.stem}"
    if module_name in sys.modules:
        module = sys.modules[module_name]
    else:
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise UsageError(f"cannot load rule file {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as error:  # a user's rule file may raise anything
            del sys.modules[module_name]
            raise UsageError(f"cannot load rule file {path}: {type(error).__name__}: {error}") from None
    return [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, Rule)
        and value is not Rule
        and value.__module__ == module_name
    ]


def load_rules(extra_dirs: Iterable[Path] = ()) -> Dict[str, Type[Rule]]:
    """Every rule from the built-in folder and `extra_dirs`, by code."""
    rules: Dict[str, Type[Rule]] = {}
    origin: Dict[str, Path] = {}
    for folder in [builtin_rules_dir(), *extra_dirs]:
        if not folder.is_dir():
            raise UsageError(f"rule folder not found: {folder}")
        for path in sorted(folder.glob("*.py")):
            if path.name.startswith("_"):
                continue
            for rule in _load_file(path):
                code = getattr(rule, "code", None)
                if not isinstance(code, str) or not _CODE.fullmatch(code):
                    raise UsageError(f"{path}: rule {rule.__name__} has no valid `code` (like DL101)")
                if code in rules:
                    raise UsageError(f"rule code {code} is defined twice: {origin[code]} and {path}")
                rules[code] = rule
                origin[code] = path
    return dict(sorted(rules.items()))
