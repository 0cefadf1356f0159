"""`--fix`: apply fixes until none is left, then write the file safely.

Each round parses the previous result afresh and applies together every
fix whose node lies inside no other's (a file's 80 `Variable(...)`
wrappers go in one round), so two fixes never fight over the same text;
when their joint result does not parse, the round falls back to the first
fix alone, and a fix whose own result does not parse is skipped. A file is
written only when the final text parses, through a temporary file in the same folder and an atomic rename,
keeping the original's permissions; if the file changed on disk since it
was read, it is left alone.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence, Type

import libcst as cst

from detachlint.analysis.project import Context
from detachlint.engine import check_module, parse
from detachlint.errors import UsageError
from detachlint.fixing import apply_replaces
from detachlint.rule import Rule

MAX_ROUNDS = 50


@dataclass(frozen=True)
class Fixed:
    source: bytes
    applied: int


def fix_source(
    source: bytes, path: str, rules: Sequence[Type[Rule]], unsafe: bool = False, project: Optional[Context] = None
) -> Fixed:
    """`source` with every applicable fix applied (safe ones, and unsafe ones
    if asked), judged with what `project` says of the run's other files."""
    applied = 0
    refused = set()  # (code, message) of fixes whose result did not parse
    for _ in range(MAX_ROUNDS):
        module, error = parse(source, path)
        if module is None:
            break
        try:
            checked = check_module(module, source, path, rules, project=project)
        except RecursionError:
            break  # too deeply nested to analyse: nothing to fix
        candidates = [
            report
            for report, _, _ in checked.reports
            if report.fix is not None and (unsafe or not report.fix.unsafe)
            and (report.code, report.message) not in refused
        ]
        if not candidates:
            break
        batch = _apart(candidates, checked.facts.index)
        if len(batch) > 1:
            new_source, count = _applied(checked, [report.fix for report in batch], path)
            if new_source is not None and count and new_source != source:
                source, applied = new_source, applied + count
                continue
        report = candidates[0]
        new_source, count = _applied(checked, [report.fix], path)
        if new_source is None or new_source == source:
            refused.add((report.code, report.message))
            continue
        source = new_source
        applied += 1
    return Fixed(source, applied)


def _apart(reports, index) -> list:
    """The reports, in source order, whose fix's node lies inside no earlier one's."""
    batch, reach = [], -1
    for report in sorted(reports, key=lambda r: index.order.get(r.fix.old, -1)):
        order = index.order.get(report.fix.old)
        if order is None or order < reach:
            continue
        batch.append(report)
        reach = index.end[report.fix.old]
    return batch


def _applied(checked, fixes, path: str):
    """The source with `fixes` applied and how many were, or (None, 0) when
    the result does not parse or compile: a broken fix never reaches the file."""
    try:
        module, count = apply_replaces(checked.module, checked.facts.names, fixes)
        new_source = module.bytes
        cst.parse_module(new_source)
        compile(new_source, path or "<fix>", "exec", dont_inherit=True)
    except Exception:
        return None, 0
    return new_source, count


def write_atomically(path: Path, data: bytes, expected_old: bytes) -> None:
    """Replace `path`'s content with `data`, or raise UsageError and leave it untouched."""
    target = path.resolve()  # a symlink: fix the file it points to
    try:
        if target.read_bytes() != expected_old:
            raise UsageError(f"{path}: changed on disk while it was being fixed; left as it was")
        mode = target.stat().st_mode
        handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".detachlint", dir=target.parent)
    except OSError as error:
        raise UsageError(f"{path}: cannot write the fix: {error.strerror or error}") from None
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, mode & 0o7777)
        os.replace(temporary, target)
    except OSError as error:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise UsageError(f"{path}: cannot write the fix: {error.strerror or error}") from None
