"""In-place edits of tensors, and the names whose storage they write.

An edit writes into a tensor's storage: an in-place method
(`c.mul_(2)`, `c.copy_(t)`), item assignment (`c[i] = v`), augmented
assignment (`c += v`, in place for tensors), `out=c`, or a functional call
with `inplace=True` (`F.relu(c, inplace=True)`). The storage written is that
of the name under the edited expression when the expression is a view of
it: basic indexing (`c[:, 0]`, `c[0]`) and view methods (`c.view(-1)`,
`c.t()`). Advanced indexing (`c[mask]`) copies, so an in-place method on it
writes a temporary; item assignment through it still writes `c`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional

import libcst as cst

from detachlint.analysis.names import dotted
from detachlint.analysis.vocabulary import NOT_VALUE_EDITS, VIEW_METHODS

if TYPE_CHECKING:  # pragma: no cover
    from detachlint.analysis import Facts


@dataclass(frozen=True)
class InplaceEdit:
    node: cst.CSTNode  # the call, or the assignment statement
    target: cst.BaseExpression  # the expression whose storage is written
    text: str  # `c.mul_()`, `c[...] = ...`, `c += ...`, `torch.add(..., out=c)`


def _is_basic_index(subscript: cst.Subscript) -> bool:
    """`x[0]`, `x[:, 1:]`, `x[..., None]`: a view, not a copy."""
    for element in subscript.slice:
        index = element.slice
        if isinstance(index, cst.Slice):
            continue
        value = index.value
        if isinstance(value, cst.UnaryOperation):
            value = value.expression
        if isinstance(value, (cst.Integer, cst.Ellipsis)) or (isinstance(value, cst.Name) and value.value == "None"):
            continue
        return False
    return True


is_basic_index = _is_basic_index  # public name for other analysis modules


def storage_name(expr: cst.BaseExpression, written_by_setitem: bool = False) -> Optional[cst.Name]:
    """The name whose storage `expr` shares: `c` for `c`, `c[:, 0]`,
    `c.view(-1)`; None for copies and anything else.

    `written_by_setitem`: `expr` is the target of an item assignment, which
    writes its base whatever the index (`c[mask] = 0`).
    """
    while True:
        if isinstance(expr, cst.Name):
            return expr
        if isinstance(expr, cst.Subscript):
            if not written_by_setitem and not _is_basic_index(expr):
                return None
            written_by_setitem = False
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in VIEW_METHODS:
            expr = expr.func.value
        elif isinstance(expr, cst.Attribute) and expr.attr.value in ("T", "mT"):
            expr = expr.value
        else:
            return None


def written_tensor(edit: InplaceEdit) -> Optional[cst.BaseExpression]:
    """The name or attribute (`w`, `conv.weight`) whose storage `edit`
    writes, through basic indexing and views; None when it writes a copy
    (`w[mask].zero_()`) or something else."""
    expr = edit.target
    setitem = isinstance(expr, cst.Subscript) and isinstance(edit.node, (cst.Assign, cst.AugAssign))
    while True:
        if isinstance(expr, (cst.Name, cst.Attribute)) and not (isinstance(expr, cst.Attribute) and expr.attr.value in ("T", "mT")):
            return expr
        if isinstance(expr, cst.Subscript):
            if not setitem and not _is_basic_index(expr):
                return None
            setitem = False
            expr = expr.value
        elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in VIEW_METHODS:
            expr = expr.func.value
        elif isinstance(expr, cst.Attribute):
            expr = expr.value
        else:
            return None


def storage_path(expr: cst.BaseExpression, index, written_by_setitem: bool = False) -> Optional[str]:
    """Like `storage_name`, also through an attribute of the instance:
    `c` for `c[:, 0]`, `self.queue` for `self.queue[:, i:j]`."""
    while isinstance(expr, (cst.Subscript, cst.Call)) or (isinstance(expr, cst.Attribute) and expr.attr.value in ("T", "mT")):
        if isinstance(expr, cst.Subscript):
            if not written_by_setitem and not _is_basic_index(expr):
                return None
            written_by_setitem = False
            expr = expr.value
        elif isinstance(expr, cst.Call):
            if not (isinstance(expr.func, cst.Attribute) and expr.func.attr.value in VIEW_METHODS):
                return None
            expr = expr.func.value
        else:
            expr = expr.value
    path = dotted(expr)
    root = expr
    while isinstance(root, cst.Attribute):
        root = root.value
    if path is None or ("." in path and not index.is_receiver(root)):
        return None
    return path


def _keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


class InplaceEdits:
    """Every in-place edit of the file, by the expression it writes."""

    def __init__(self, facts: "Facts") -> None:
        self.facts = facts
        self.by_target: Dict[cst.CSTNode, InplaceEdit] = {}
        self.edits: List[InplaceEdit] = []
        index = facts.index
        for call in index.nodes(cst.Call):
            self._call(call)
        for assign in index.nodes(cst.Assign):
            for target in assign.targets:
                if isinstance(target.target, cst.Subscript):
                    self._add(InplaceEdit(assign, target.target, self._text(target.target.value) + "[...] = ..."))
        for aug in index.nodes(cst.AugAssign):
            operator = facts.module.code_for_node(aug.operator).strip()
            if isinstance(aug.target, cst.Subscript):
                self._add(InplaceEdit(aug, aug.target, f"{self._text(aug.target.value)}[...] {operator} ..."))
            else:
                self._add(InplaceEdit(aug, aug.target, f"{self._text(aug.target)} {operator} ..."))
        self.edits.sort(key=lambda edit: index.order[edit.node])

    def _text(self, expr: cst.CSTNode) -> str:
        text = self.facts.module.code_for_node(expr)
        return text if len(text) <= 40 and "\n" not in text else "..."

    def _add(self, edit: InplaceEdit) -> None:
        self.by_target.setdefault(edit.target, edit)
        self.edits.append(edit)

    def _call(self, call: cst.Call) -> None:
        func = call.func
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if method.endswith("_") and not method.startswith("_") and method not in NOT_VALUE_EDITS:
                self._add(InplaceEdit(call, func.value, f"{self._text(func.value)}.{method}()"))
                return
        out = _keyword(call, "out")
        inplace = _keyword(call, "inplace")
        if out is None and inplace is None:
            return  # most calls: no need to print the callee
        name = self.facts.module.code_for_node(func)
        if out is not None:
            self._add(InplaceEdit(call, out.value, f"{name}(..., out={self._text(out.value)})"))
        if inplace is not None and isinstance(inplace.value, cst.Name) and inplace.value.value == "True":
            if call.args and call.args[0].keyword is None:
                self._add(InplaceEdit(call, call.args[0].value, f"{name}({self._text(call.args[0].value)}, inplace=True)"))

    def edit_of(self, expr: cst.CSTNode) -> Optional[InplaceEdit]:
        """The edit that writes `expr` itself (as receiver, target or `out=`)."""
        return self.by_target.get(expr)

    def edits_of(self, name: str, scope: cst.CSTNode) -> List[InplaceEdit]:
        """Edits in `scope` (its own code) that write the storage of `name`."""
        index = self.facts.index
        found = []
        for edit in self.edits:
            if index.scope_of(edit.node) is not scope:
                continue
            setitem = isinstance(edit.target, cst.Subscript) and isinstance(edit.node, (cst.Assign, cst.AugAssign))
            base = storage_name(edit.target, written_by_setitem=setitem)
            if base is not None and base.value == name:
                found.append(edit)
        return found

    def edits_of_path(self, path: str, scope: cst.CSTNode) -> List[InplaceEdit]:
        """Edits in `scope` (its own code) that write the storage of `path`:
        a name (`c`) or an attribute of the instance (`self.queue`), through
        indexing and views (`self.queue[:, i:j] = keys.T`)."""
        index = self.facts.index
        found = []
        for edit in self.edits:
            if index.scope_of(edit.node) is not scope:
                continue
            setitem = isinstance(edit.target, cst.Subscript) and isinstance(edit.node, (cst.Assign, cst.AugAssign))
            if storage_path(edit.target, index, written_by_setitem=setitem) == path:
                found.append(edit)
        return found
