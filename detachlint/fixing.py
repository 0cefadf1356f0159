"""Turn a rule's `Replace` into new source text and into a text edit.

A fix is applied to the tree (`deep_replace`), so libcst keeps every
comment and all formatting outside the replaced node, and indentation of
the new node follows its place in the file.
"""

from __future__ import annotations

import libcst as cst

from detachlint.analysis.names import ImportTable
from detachlint.finding import Edit, Fix
from detachlint.rule import Replace


def _with_import(module: cst.Module, name: str) -> cst.Module:
    """`module` with `import name` after its docstring and leading imports."""
    statement = cst.parse_statement(f"import {name}\n")
    body = list(module.body)
    at = 0
    for i, line in enumerate(body):
        if not isinstance(line, cst.SimpleStatementLine):
            break
        first = line.body[0]
        is_docstring = i == 0 and isinstance(first, cst.Expr) and isinstance(first.value, cst.BaseString)
        if is_docstring or isinstance(first, (cst.Import, cst.ImportFrom)):
            at = i + 1
        else:
            break
    body.insert(at, statement)
    return module.with_changes(body=body)


def apply_replace(module: cst.Module, names: ImportTable, fix: Replace) -> cst.Module:
    """`module` with `fix` applied and the imports it needs added."""
    module = module.deep_replace(fix.old, fix.new)
    assert isinstance(module, cst.Module)
    for name in fix.imports:
        if names.local_name(name) is None:
            module = _with_import(module, name)
    return module


def _position(text: str, offset: int):
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column


def text_edit(old: str, new: str) -> Edit:
    """The one replacement that turns `old` into `new` (shared ends trimmed)."""
    start = 0
    limit = min(len(old), len(new))
    while start < limit and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old -= 1
        end_new -= 1
    line, column = _position(old, start)
    end_line, end_column = _position(old, end_old)
    return Edit(line, column, end_line, end_column, new[start:end_new])


def describe_fix(module: cst.Module, names: ImportTable, fix: Replace, title: str) -> Fix:
    """The fix as a text edit, for reports and editors."""
    edit = text_edit(module.code, apply_replace(module, names, fix).code)
    return Fix(title=title, applicability="unsafe" if fix.unsafe else "safe", edits=(edit,))
