"""`--fix`: apply fixes until none is left, then write the file safely.

Fixes are applied one at a time, each on a fresh parse of the previous
result, so two fixes never fight over the same text; a fix whose result
does not parse is skipped. A file is written only when the final text
parses, through a temporary file in the same folder and an atomic rename,
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
from detachlint.fixing import apply_replace
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
        report = candidates[0]
        try:
            new_source = apply_replace(checked.module, checked.facts.names, report.fix).bytes
            cst.parse_module(new_source)
            compile(new_source, path or "<fix>", "exec", dont_inherit=True)
        except Exception:  # a broken fix must never reach the file
            refused.add((report.code, report.message))
            continue
        if new_source == source:
            refused.add((report.code, report.message))
            continue
        source = new_source
        applied += 1
    return Fixed(source, applied)


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
