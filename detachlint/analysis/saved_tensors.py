"""Which operands autograd saves for backward.

A product saves each factor to compute the other factor's gradient:
`a * b`, `a / b`, `a @ b`, `torch.einsum(eq, [a, b])`, `torch.matmul`,
`mm`, `bmm`, `mul`, `div`, `F.linear(x, w)`, and the methods `.mul`,
`.div`, `.matmul`, `.mm`, `.bmm`. It keeps `b` when another operand requires
grad. An in-place edit of `b` (or of any tensor sharing its storage and
version counter: `b.detach()` shares both) between that forward and the
backward makes backward raise "one of the variables needed for gradient
computation has been modified by an inplace operation". Sums,
concatenations and copies save nothing, so an edit after them is harmless.
`may_save` answers it for one name's uses in an expression.

Reached from rules as `facts.shared("saved_tensors", SavedTensors)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List, Optional

import libcst as cst

from detachlint.analysis.aliases import StorageAliases
from detachlint.analysis.inplace import InplaceEdit, InplaceEdits
from detachlint.analysis.values import GRAD
from detachlint.analysis.vocabulary import VIEW_METHODS

if TYPE_CHECKING:  # pragma: no cover
    from detachlint.analysis import Facts

_SAVING_FUNCTIONS = {
    "torch.einsum", "torch.matmul", "torch.mm", "torch.bmm", "torch.mul", "torch.div",
    "torch.nn.functional.linear", "torch.bilinear", "torch.nn.functional.bilinear",
}
_SAVING_METHODS = {"mul", "div", "matmul", "mm", "bmm"}
_PRODUCTS = (cst.Multiply, cst.Divide, cst.MatrixMultiply)


class SavedTensors:
    def __init__(self, facts: "Facts") -> None:
        self.facts = facts
        self.index = facts.index
        self.values = facts.values

    def saving_operation(self, operand: cst.BaseExpression) -> Optional[cst.CSTNode]:
        """The product that saves `operand` for backward because another of
        its operands holds a graph; None for anything else."""
        if self.facts.grad_mode.is_disabled(operand):
            return None
        node: cst.CSTNode = self._through_views(operand)
        parent = self.index.parent(node)
        if isinstance(parent, cst.Element):  # `torch.einsum(eq, [q, operand])`
            node = self.index.parent(parent)
            parent = self.index.parent(node)
        if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, _PRODUCTS):
            other = parent.left if parent.right is node else parent.right
            return parent if self._has_graph(other) else None
        if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in _SAVING_METHODS:
            call = self.index.parent(parent)
            if isinstance(call, cst.Call) and call.func is parent:
                return call if any(self._has_graph(arg.value) for arg in call.args) else None
            return None
        if isinstance(parent, cst.Arg) and parent.value is node:
            call = self.index.parent(parent)
            if isinstance(call, cst.Call) and self.facts.names.qualified(call.func) in _SAVING_FUNCTIONS:
                others = _operands([a.value for a in call.args], operand)
                return call if any(self._has_graph(o) for o in others) else None
        return None

    def needed_later(self, operation: cst.CSTNode) -> bool:
        """Whether backward will run through `operation`: a backward of its
        function starts from what it computes, or its function returns it."""
        if self.values.backwards_from(operation):
            return True
        scope = self.values.scope(operation)
        flowing = scope.flows_from(operation)
        function = self.index.scope_of(operation)
        for returned in self.index.descendants(function, cst.Return):
            if self.index.scope_of(returned) is not function or returned.value is None:
                continue
            value = returned.value
            if self.index.is_inside(operation, value) or scope.reads_flow(value, flowing):
                return True
        return False

    def edits_after(self, path: str, operation: cst.CSTNode) -> List[InplaceEdit]:
        """In-place edits of `path` (`buf`, `self.queue`) after `operation`
        and before any backward of its function: in the function itself, or,
        for an attribute of the instance, in a method it calls (`self._enqueue(k)`)."""
        index = self.index
        function = index.scope_of(operation)
        edits = self.facts.shared("inplace", InplaceEdits)
        backwards = [c for c in index.descendants(function, cst.Call) if self.values.backward_target(c) is not None]
        found = []
        aliases = self.facts.shared("aliases", StorageAliases)
        for edit in edits.edits_of_path(path, function):
            if "." in path or aliases.binding(path, edit.node) is aliases.binding(path, operation):
                found.append((edit.node, edit))  # not `buf = torch.zeros(...)` in between
        receiver = index.receiver(operation)
        if receiver and path.startswith(receiver + "."):
            for call in index.descendants(function, cst.Call):
                for helper in self.facts.intent.helpers_called(call):
                    found.extend((call, edit) for edit in edits.edits_of_path(path, helper))
        return [
            edit for at, edit in found
            if index.before(operation, at) and not any(index.before(operation, b) and index.before(b, at) for b in backwards)
        ]

    def _through_views(self, node: cst.CSTNode) -> cst.CSTNode:
        """`bank.detach()` -> `bank.detach().T`: a view shares the version counter."""
        while True:
            parent = self.index.parent(node)
            if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in ("T", "mT"):
                node = parent
                continue
            call = self.index.parent(parent) if isinstance(parent, cst.Attribute) else None
            if isinstance(call, cst.Call) and call.func is parent and parent.value is node and parent.attr.value in VIEW_METHODS:
                node = call
                continue
            return node

    def _has_graph(self, expr: cst.BaseExpression) -> bool:
        return bool(self.values.holds(expr) & GRAD)


def _operands(exprs: List[cst.BaseExpression], skip: cst.CSTNode) -> List[cst.BaseExpression]:
    """Arguments but `skip`, with the elements of list and tuple arguments spread out."""
    found = []
    for expr in exprs:
        if isinstance(expr, (cst.List, cst.Tuple)):
            found.extend(e.value for e in expr.elements if e.value is not skip)
        elif expr is not skip:
            found.append(expr)
    return found


def may_save(value: cst.BaseExpression, name: str, index) -> bool:
    """Whether computing `value` may save the tensor `name` holds for
    backward. Sums, `.sum()`, `.mean()`, `.clone()` and products with a
    number save nothing of it (`y = 2 * x`: backward needs only the 2), so
    editing it afterwards leaves the gradients as they were."""
    uses = [n for n in [value, *index.descendants(value, cst.Name)] if isinstance(n, cst.Name) and n.value == name]
    return any(not _unsaved_use(use, index) for use in uses)


def _unsaved_use(use: cst.Name, index) -> bool:
    parent = index.parent(use)
    if isinstance(parent, cst.BinaryOperation):
        if isinstance(parent.operator, (cst.Add, cst.Subtract)):
            return True
        other = parent.right if parent.left is use else parent.left
        if isinstance(other, cst.UnaryOperation):
            other = other.expression
        number = isinstance(other, (cst.Integer, cst.Float))
        return number and (isinstance(parent.operator, cst.Multiply) or (isinstance(parent.operator, cst.Divide) and parent.left is use))
    if isinstance(parent, cst.Attribute) and parent.value is use and parent.attr.value in ("sum", "mean", "clone"):
        call = index.parent(parent)
        return isinstance(call, cst.Call) and call.func is parent
    return False
