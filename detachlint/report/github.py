"""GitHub Actions workflow commands: each finding becomes an annotation on
the pull request's diff."""

from __future__ import annotations

from typing import Sequence

from detachlint.finding import Finding


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(findings: Sequence[Finding], context) -> str:
    lines = []
    for f in findings:
        level = {"warning": "warning", "info": "notice"}.get(f.severity, "error")
        if f.cell is None:
            where = (("file", f.path), ("line", f.line), ("endLine", f.end_line), ("col", f.column), ("endColumn", f.end_column))
            title = f"{f.code} {f.name}"
        else:
            # A notebook's lines are not the lines of its JSON on the diff:
            # the annotation goes on the file, the cell in its title.
            where = (("file", f.path),)
            title = f"{f.code} {f.name} (cell {f.cell}, line {f.line})"
        properties = ",".join(f"{key}={_property(str(value))}" for key, value in (*where, ("title", title)))
        lines.append(f"::{level} {properties}::{_data(f'{f.code} {f.message}')}")
    return "".join(line + "\n" for line in lines)
