"""The one call every front end makes: paths and options in, findings out."""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Type

from detachlint.config import Config, Selection, enabled_codes, expand, find_config_file, load_config
from detachlint.discovery import Target, discover, matches
from detachlint.engine import PARSE_ERROR_CODE, FileResult, lint_source
from detachlint.errors import UsageError
from detachlint.finding import Finding
from detachlint.fixer import fix_source, write_atomically
from detachlint.registry import load_rules
from detachlint.rule import Rule


@dataclass(frozen=True)
class CheckOptions:
    selection: Selection = Selection()
    config_file: Optional[Path] = None
    stdin: Optional[bytes] = None  # the text of `-`
    stdin_filename: Optional[str] = None
    fix: bool = False  # write fixed files
    unsafe_fixes: bool = False  # also apply fixes that change behaviour
    diff: bool = False  # compute the fixes' diffs, write nothing


@dataclass
class RunResult:
    findings: List[Finding] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)  # unreadable paths, internal errors
    files: int = 0
    fixed: int = 0  # fixes applied (or, with diff, that would be)
    diffs: List[str] = field(default_factory=list)
    stdin_fixed: Optional[bytes] = None  # `-` with fix: the fixed text


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


def _fix(display: str, path: Optional[Path], source: bytes, setup: Setup, options: CheckOptions, run: RunResult) -> bytes:
    """Apply fixes as `options` asks; the source to report findings on."""
    fixed = fix_source(source, display, rules_for(path or Path(display), setup), options.unsafe_fixes)
    if not fixed.applied:
        return source
    run.fixed += fixed.applied
    if options.diff:
        run.diffs.append(unified_diff(display, source, fixed.source))
        return source
    if path is None:
        run.stdin_fixed = fixed.source
        return fixed.source
    try:
        write_atomically(path, fixed.source, source)
    except UsageError as error:
        run.fixed -= fixed.applied
        run.errors.append(str(error))
        return source
    return fixed.source


def unified_diff(display: str, old: bytes, new: bytes) -> str:
    lines = difflib.unified_diff(
        old.decode("utf-8", "replace").splitlines(keepends=True),
        new.decode("utf-8", "replace").splitlines(keepends=True),
        fromfile=display if os.path.isabs(display) else f"a/{display}",
        tofile=display if os.path.isabs(display) else f"b/{display}",
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def check(paths: Sequence[str], options: CheckOptions = CheckOptions()) -> RunResult:
    """Lint `paths` (`-` is stdin) and return every finding, sorted."""
    setup = prepare(paths, options)
    run = RunResult()
    file_paths = [p for p in paths if p != "-"]
    targets, run.errors = discover(file_paths, setup.config)
    fixing = options.fix or options.diff
    if "-" in paths:
        display = options.stdin_filename or "-"
        source = options.stdin or b""
        if fixing:
            source = _fix(display, None, source, setup, options, run)
        result = lint_target(display, Path(display), source, setup)
        run.findings.extend(result.findings)
        run.errors.extend(result.errors)
        run.files += 1
    for target in targets:
        try:
            source = target.path.read_bytes()
        except OSError as error:
            run.errors.append(f"{target.display}: cannot read: {error.strerror or error}")
            continue
        if fixing:
            source = _fix(target.display, target.path, source, setup, options, run)
        result = lint_target(target.display, target.path, source, setup)
        run.findings.extend(result.findings)
        run.errors.extend(result.errors)
        run.files += 1
    run.findings.sort()
    return run
