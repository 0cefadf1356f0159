"""Which names share one tensor, and where they are read afterwards.

Two questions about aliasing within one function, in source order:

- `detached_alias(assign)`: `c = out.detach()` (possibly through views:
  `out[:, 0].detach()`, `out.detach().view(-1)`) makes `c` share `out`'s
  storage; returns the source name and the `detach()` call.
- `holders(name, at)`: which other names hold the very tensor `name` holds
  at `at`: plain aliases (`a = t`) and containers it was put in
  (`outs.append(t)`, `d[k] = t`, `pair = (t, u)`).

`reads_after(name, binding, node)` lists the reads of `name` after `node`
that still see the binding live at `binding` (a later assignment of the name
ends it), and `value_reads_after` keeps the reads that use the tensor's
values rather than its shape, dtype or device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Optional, Tuple

import libcst as cst

from detachlint.analysis.inplace import storage_name
from detachlint.analysis.vocabulary import (
    DETACHING_METHODS,
    IDENTITY_BUILTINS,
    STORING_METHODS,
    TENSOR_METADATA,
    TO_PYTHON_METHODS,
    VIEW_METHODS,
)

if TYPE_CHECKING:  # pragma: no cover
    from detachlint.analysis import Facts

# Reads that leave the graph: the value is used, but not as a tensor in it.
_OUT_OF_GRAPH = TENSOR_METADATA | TO_PYTHON_METHODS | DETACHING_METHODS | {"data", "grad", "cpu"}
# A queue's `put` stores its argument too.
_CONTAINER_METHODS = STORING_METHODS | {"put"}


@dataclass(frozen=True)
class DetachedAlias:
    alias: str
    source: cst.Name  # `out` in `c = out.detach()`
    detach: cst.BaseExpression  # the `.detach()` call, or the `out.data` attribute
    through: str = "detach"  # "detach" or "data": whether autograd still checks versions


@dataclass(frozen=True)
class Holder:
    name: str  # the other name (an alias or a container)
    node: cst.CSTNode  # the statement or call that made it hold the tensor
    text: str  # how the message names it: `a`, `outs`


class StorageAliases:
    def __init__(self, facts: "Facts") -> None:
        self.facts = facts

    # Bindings ---------------------------------------------------------------

    def binding(self, name: str, at: cst.CSTNode) -> Optional[cst.CSTNode]:
        """The assignment of `name` live at `at` in its function, ignoring
        augmented assignments (`c += 1` edits the same tensor)."""
        scope = self.facts.values.scope(at)
        order = self.facts.index.order[at]
        found = None
        for entry_order, node, _, _ in scope.assignments.get(name, ()):
            if entry_order >= order:
                break
            if isinstance(node, cst.AugAssign) or self.facts.index.is_inside(at, node):
                continue
            found = node
        return found

    def reads_after(self, name: str, binding: Optional[cst.CSTNode], node: cst.CSTNode) -> List[cst.Name]:
        """Reads of `name` after `node` that still see `binding`."""
        scope = self.facts.values.scope(node)
        return [
            read
            for read in scope.reads_after(name, node)
            if self.binding(name, read) is binding and not self._deleted(read) and not self._exclusive(node, read)
        ]

    def _exclusive(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """Whether `a` and `b` sit in different branches of one `if`."""
        index = self.facts.index
        for branch in index.ancestors(a):
            if isinstance(branch, cst.If) and index.is_inside(b, branch):
                in_body = index.is_inside(a, branch.body)
                return in_body != index.is_inside(b, branch.body) and not index.is_inside(b, branch.test)
        return False

    def value_reads_after(self, name: str, binding: Optional[cst.CSTNode], node: cst.CSTNode, in_graph: bool = False) -> List[cst.Name]:
        """Like `reads_after`, keeping reads of the values; with `in_graph`,
        only reads that use the tensor in autograd (grad mode on, not
        `.item()`, `.detach()`, `.cpu()` and the like)."""
        excluded = _OUT_OF_GRAPH if in_graph else TENSOR_METADATA
        found = []
        for read in self.reads_after(name, binding, node):
            used: cst.CSTNode = read
            parent = self.facts.index.parent(read)
            while isinstance(parent, cst.Subscript) and parent.value is used:  # `outs[-1].item()`
                used, parent = parent, self.facts.index.parent(parent)
            if isinstance(parent, cst.Attribute) and parent.value is used and parent.attr.value in excluded:
                continue
            if isinstance(parent, cst.Arg) and self._is_len(parent):
                continue
            if in_graph and self.facts.grad_mode.is_disabled(read):
                continue
            found.append(read)
        return found

    def _deleted(self, read: cst.Name) -> bool:
        return any(isinstance(a, cst.Del) for a in self.facts.index.ancestors(read))

    def _is_len(self, arg: cst.Arg) -> bool:
        call = self.facts.index.parent(arg)
        return isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value in IDENTITY_BUILTINS

    # Detached aliases -------------------------------------------------------

    def detached_alias(self, assign: cst.Assign) -> Optional[DetachedAlias]:
        """`c = out.detach()` or `c = out.data`: `c` shares `out`'s storage
        without its graph."""
        if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
            return None
        detach = _detach_under_views(assign.value)
        if detach is None:
            return None
        through = "data" if isinstance(detach, cst.Attribute) else "detach"
        owner = detach.value if isinstance(detach, cst.Attribute) else detach.func.value  # type: ignore[attr-defined]
        source = storage_name(owner)
        if source is None:
            return None
        return DetachedAlias(assign.targets[0].target.value, source, detach, through)

    # Holders ----------------------------------------------------------------

    def holders(self, name: str, at: cst.CSTNode) -> List[Holder]:
        """Other names holding the tensor `name` holds at `at`, made between
        `name`'s binding and `at`."""
        facts = self.facts
        index = facts.index
        binding = self.binding(name, at)
        scope_node = index.scope_of(at)
        start = index.order[binding] if binding is not None else index.order[scope_node]
        stop = index.order[at]
        found: List[Holder] = []
        scope = facts.values.scope(at)
        for read in scope.reads.get(name, ()):
            if not start < index.order[read] < stop or self.binding(name, read) is not binding:
                continue
            holder = self._holder_of(read)
            if holder is not None:
                found.append(holder)
        return found

    def _holder_of(self, read: cst.Name) -> Optional[Holder]:
        """The name `read` is stored into, when the read stores the tensor itself."""
        index = self.facts.index
        parent = index.parent(read)
        if isinstance(parent, cst.Assign) and parent.value is read:
            return _assigned_holder(parent, read)
        if isinstance(parent, cst.Element):
            literal = index.parent(parent)
            statement = index.parent(literal)
            if isinstance(statement, cst.Assign) and statement.value is literal:
                return _assigned_holder(statement, read)
        if isinstance(parent, cst.DictElement) and parent.value is read:
            literal = index.parent(parent)
            statement = index.parent(literal)
            if isinstance(statement, cst.Assign) and statement.value is literal:
                return _assigned_holder(statement, read)
        if isinstance(parent, cst.Arg) and parent.value is read:
            call = index.parent(parent)
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and isinstance(call.func.value, cst.Name):
                if call.func.attr.value in _CONTAINER_METHODS:
                    container = call.func.value.value
                    return Holder(container, call, container)
        return None

    def holder_binding(self, holder: Holder) -> Tuple[str, Optional[cst.CSTNode]]:
        """The holder's name and its binding live just after it took the tensor."""
        if isinstance(holder.node, cst.Assign) and _binds(holder.node, holder.name):
            return holder.name, holder.node
        return holder.name, self.binding(holder.name, holder.node)


def _binds(assign: cst.Assign, name: str) -> bool:
    return any(isinstance(t.target, cst.Name) and t.target.value == name for t in assign.targets)


def _assigned_holder(assign: cst.Assign, read: cst.Name) -> Optional[Holder]:
    for target in assign.targets:
        t = target.target
        if isinstance(t, cst.Name) and t.value != read.value:
            return Holder(t.value, assign, t.value)
        if isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name):
            return Holder(t.value.value, assign, t.value.value)
    return None


def _detach_under_views(expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """The `.detach()` call or `.data` attribute `expr` is, or views of it."""
    while isinstance(expr, (cst.Call, cst.Subscript, cst.Attribute)):
        if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            return expr
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
            method = expr.func.attr.value
            if method == "detach" and not expr.args:
                return expr
            if method not in VIEW_METHODS:
                return None
            expr = expr.func.value
        elif isinstance(expr, cst.Subscript):
            if storage_name(cst.Subscript(value=cst.Name("x"), slice=expr.slice)) is None:
                return None
            expr = expr.value
        elif isinstance(expr, cst.Attribute) and expr.attr.value in ("T", "mT"):
            expr = expr.value
        else:
            return None
    return None
