"""Turn a rule's `Replace` into new source text and into a text edit.

A fix is applied to the tree (`deep_replace`), so libcst keeps every
comment and all formatting outside the replaced node, and indentation of
the new node follows its place in the file.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections import Counter
from typing import Mapping, Optional, Tuple

import libcst as cst
import libcst.helpers
from libcst._nodes.internal import CodegenState  # to regenerate one statement at its indentation

from detachlint.analysis.index import children
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


class _DropImports(cst.CSTTransformer):
    """Remove `from a.b import c [as d]` for the given (`a.b`, `c`) pairs
    whose local name nothing uses; a statement left empty goes too."""

    def __init__(self, unused, used) -> None:
        self.unused = unused
        self.used = used

    def leave_ImportFrom(self, original, updated):
        if updated.module is None or isinstance(updated.names, cst.ImportStar):
            return updated
        kept = [alias for alias, pair, local in _from_names(updated) if pair not in self.unused or local in self.used]
        if len(kept) == len(updated.names):
            return updated
        if not kept:
            return cst.RemovalSentinel.REMOVE
        kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(names=kept)

    def leave_SimpleStatementLine(self, original, updated):
        if len(updated.body) < len(original.body) and updated.body:
            # `import torch; from torch.autograd import Variable` keeps no dangling `;`.
            last = updated.body[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
            return updated.with_changes(body=[*updated.body[:-1], last])
        return updated


def _name_uses(node: cst.CSTNode, imports: Optional[list] = None) -> Counter:
    """How often each name is read or written outside import statements
    (`torch.autograd.Variable` does not use a local `Variable`), by the
    index's cheap walk: a libcst visitor rebuilds every node it passes.
    The `from` imports met go into `imports`."""
    uses: Counter = Counter()
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, cst.Name):
            uses[current.value] += 1
        elif isinstance(current, (cst.Import, cst.ImportFrom)):
            if imports is not None and isinstance(current, cst.ImportFrom):
                imports.append(current)
        elif isinstance(current, cst.Attribute):
            stack.append(current.value)
        else:
            stack.extend(children(current))
    return uses


def _from_names(node: cst.ImportFrom):
    """(alias, (`a.b`, `c`), local name) for each name of `from a.b import c [as d]`."""
    if node.module is None or isinstance(node.names, cst.ImportStar):
        return
    source = cst.helpers.get_full_name_for_node(node.module)
    for alias in node.names:
        local = alias.asname.name.value if alias.asname else alias.name.value
        yield alias, (source, cst.helpers.get_full_name_for_node(alias.name)), local


def _imported_as(imports, qualified) -> set:
    """The local names that `from a.b import c [as d]` statements among
    `imports` give the `a.b.c` in `qualified`."""
    wanted = {tuple(name.rsplit(".", 1)) for name in qualified}
    return {local for node in imports for _, pair, local in _from_names(node) if pair in wanted}


def _without_unused(module: cst.Module, qualified) -> cst.Module:
    unused = {tuple(name.rsplit(".", 1)) for name in qualified}
    return module.visit(_DropImports(unused, _name_uses(module)))


def apply_replace(module: cst.Module, names: ImportTable, fix: Replace) -> cst.Module:
    """`module` with `fix` applied, the imports it needs added and the ones
    it leaves unused (of those it names) removed."""
    module = module.deep_replace(fix.old, fix.new)
    assert isinstance(module, cst.Module)
    for name in fix.imports:
        if names.local_name(name) is None:
            module = _with_import(module, name)
    if fix.drop_unused:
        module = _without_unused(module, fix.drop_unused)
    return module


class _Replacements(cst.CSTTransformer):
    """Put each new node where its old one is, in one pass over the tree."""

    def __init__(self, new_by_old) -> None:
        self.new_by_old = new_by_old
        self.done: list = []  # the old nodes replaced

    def on_leave(self, original_node, updated_node):
        new = self.new_by_old.get(original_node)
        if new is None:
            return updated_node
        self.done.append(original_node)
        return new


def apply_replaces(module: cst.Module, names: ImportTable, fixes) -> "Tuple[cst.Module, int]":
    """`module` with every fix of `fixes` applied, none of whose `old` nodes
    lies inside another's, the imports they need added once and those they
    leave unused removed; and how many were applied."""
    if len(fixes) == 1:
        return apply_replace(module, names, fixes[0]), 1
    replacements = _Replacements({fix.old: fix.new for fix in fixes})
    module = module.visit(replacements)
    for name in dict.fromkeys(name for fix in fixes for name in fix.imports):
        if names.local_name(name) is None:
            module = _with_import(module, name)
    unused = tuple(dict.fromkeys(name for fix in fixes for name in fix.drop_unused))
    if unused:
        module = _without_unused(module, unused)
    return module, len(replacements.done)


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


# Parts of a compound statement that lead to its blocks (`else`, `elif`, `except`, ...).
_CLAUSES = (cst.If, cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase)


class FixDescriber:
    """Fixes of one file as text edits, each at the cost of the innermost
    statement that holds it: a file with N findings is not regenerated N
    times."""

    def __init__(
        self, module: cst.Module, names: ImportTable, positions, parents: Mapping[cst.CSTNode, cst.CSTNode], whole_module: bool = True
    ) -> None:
        self.module = module
        # False for a section of a long file: an edit the whole module must
        # make (an import added or dropped) is not the section's to describe.
        self.whole_module = whole_module
        self.names = names
        self.positions = positions
        self.parents = parents
        self._starts = None  # first line of each top-level statement's code
        self._uses = None  # how often each name occurs outside imports
        self._imports: list = []  # the module's `from ... import ...` statements

    def _frees_an_import(self, fix: Replace) -> bool:
        """Whether `fix` removes the last use of a name it would drop the
        import of (`Variable` in `from torch.autograd import Variable`).
        While other uses remain, the fix stays inside its statement."""
        if not fix.drop_unused:
            return False
        if self._uses is None:
            self._uses = _name_uses(self.module, self._imports)
        removed = _name_uses(fix.old)
        added = _name_uses(fix.new) if isinstance(fix.new, cst.CSTNode) else Counter()
        return any(
            self._uses[local] - removed[local] + added[local] <= 0
            for local in _imported_as(self._imports, fix.drop_unused)
        )

    def _layout(self):
        """The line each top-level statement's code starts on."""
        if self._starts is None and hasattr(self.positions, "code_lines"):
            self._starts = self.positions.code_lines
        if self._starts is None:
            line = 1 + sum(self.module.code_for_node(empty).count("\n") for empty in self.module.header)
            self._starts = []
            for statement in self.module.body:
                self._starts.append(line)
                line += self.module.code_for_node(statement).count("\n")
        return self._starts

    def _statement_holding(self, node: cst.CSTNode, removed: bool = False):
        """The innermost statement of a statement list that holds `node`,
        with the indentation of the blocks around it, found by walking up
        from `node`; None when none can be regenerated on its own (a
        decorated definition, a header of the module). `removed`: the fix
        deletes `node`, so a line that holds only it is not the place."""
        path = [node]
        while path[-1] is not self.module:
            parent = self.parents.get(path[-1])
            if parent is None:
                return None
            path.append(parent)
        path.reverse()
        found, indents = None, []
        for outer, inner in zip(path, path[1:]):
            if isinstance(outer, (cst.Module, cst.IndentedBlock)):
                if removed and (inner is node or (isinstance(inner, cst.SimpleStatementLine) and len(inner.body) == 1 and inner.body[0] is node)):
                    return found  # the line goes: the statement around it is the place
                if not getattr(inner, "decorators", ()):
                    found = (inner, tuple(indents))
                if inner is node or isinstance(inner, cst.SimpleStatementLine):
                    return found
            elif isinstance(inner, cst.IndentedBlock):
                indents.append(self.module.default_indent if inner.indent is None else inner.indent)
            elif not isinstance(inner, _CLAUSES):
                return found  # in a header: the statement itself is the place
        return found

    def _code(self, statement: cst.CSTNode, indents) -> str:
        """`statement`'s code as it stands in the file, from the start of its
        first line (its indentation included, its leading comments left out)."""
        state = CodegenState(self.module.default_indent, self.module.default_newline, indent_tokens=list(indents))
        statement.with_changes(leading_lines=())._codegen(state)
        return "".join(state.tokens)

    def _in_its_statement(self, fix: Replace):
        """The edit made inside the innermost statement that holds
        `fix.old`: only that statement is regenerated."""
        found = self._statement_holding(fix.old, isinstance(fix.new, cst.RemovalSentinel))
        if found is None:
            return None
        statement, indents = found
        replaced = statement.deep_replace(fix.old, fix.new)
        if replaced is statement or not isinstance(replaced, cst.BaseStatement):
            return None
        edit = text_edit(self._code(statement, indents), self._code(replaced, indents))
        shift = self.positions[statement].start.line - 1
        return dataclasses.replace(edit, line=edit.line + shift, end_line=edit.end_line + shift)

    def _local(self, fix: Replace):
        """The edit made inside the statement that holds `fix.old`, or None
        when the fix reaches beyond it."""
        if any(self.names.local_name(name) is None for name in fix.imports) or self._frees_an_import(fix):
            return None  # it edits the imports too
        where = self.positions.get(fix.old)
        if where is None:
            return None
        edit = self._in_its_statement(fix)
        if edit is not None or isinstance(fix.new, cst.RemovalSentinel):
            return edit  # a line removed at the top level: the whole module speaks
        starts = self._layout()
        index = bisect.bisect_right(starts, where.start.line) - 1
        if index < 0:
            return None
        statement = self.module.body[index]
        replaced = statement.deep_replace(fix.old, fix.new)
        if replaced is statement:
            return None  # not found there: let the whole module speak
        old = self.module.code_for_node(statement)
        new = self.module.code_for_node(replaced)
        edit = text_edit(old, new)
        shift = starts[index] - 1
        return dataclasses.replace(edit, line=edit.line + shift, end_line=edit.end_line + shift)

    def describe(self, fix: Replace, title: str) -> Optional[Fix]:
        """The fix as a text edit, for reports and editors; None when only
        the whole module could describe it and it is not `whole_module`."""
        edit = self._local(fix)
        if edit is None and not self.whole_module:
            return None
        if edit is None:
            edit = text_edit(self.module.code, apply_replace(self.module, self.names, fix).code)
        return Fix(title=title, applicability="unsafe" if fix.unsafe else "safe", edits=(edit,))
