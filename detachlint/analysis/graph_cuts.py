"""Where a value read without its graph (`x.data`, `x.detach()`) does harm.

A cut is harmless while its value is only looked at (logging, metrics, an
optimizer's own update, weight init). It does harm when:

- `weighs_itself(seed, name)`: a factor computed from the cut of `name`
  multiplies `name` itself, with its graph, in the same value
  (`pt = logpt.data.exp(); loss = (1 - pt) ** g * logpt`): backward treats
  the factor as a constant and drops its share of `name`'s gradient;
- `carried_state_cut(seed)`: a loop in a module's `forward` rebinds a state
  to its own cut (`h = h.data.clone()`) while the loop writes graph values
  into it and `forward` returns it: the earlier steps get no gradient;
- `kept_alias(assign)`: the cut is bound to a name (`g = p.grad.data`) that
  is then stored where it outlives the call (`self.state[p]["prev"] = g`),
  so the stored "previous" value is the live tensor, refilled in place by
  the next backward (a `.grad`) or by the update that follows (a parameter).

`reaches_graph_output(expr)` says whether a value ends in a loss that is
backpropagated, or in what a module's `forward` returns: "in the graph",
proven by use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, List, Optional

import libcst as cst

from detachlint.analysis.inplace import InplaceEdits
from detachlint.analysis.names import dotted
from detachlint.analysis.values import GRAD, graph_cut
from detachlint.analysis.vocabulary import COPYING_METHODS

if TYPE_CHECKING:  # pragma: no cover
    from detachlint.analysis import Facts

# Operators through which a factor scales the other operand's gradient.
_SCALING = (cst.Multiply, cst.Divide, cst.Power, cst.MatrixMultiply)
_MAX_HOPS = 3


class GraphCuts:
    def __init__(self, facts: "Facts") -> None:
        self.facts = facts
        self.index = facts.index
        self.values = facts.values

    # Following a value -------------------------------------------------------

    def _expression_chain(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """`node`'s ancestors within its expression, innermost first."""
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.BaseStatement, cst.BaseSmallStatement, cst.Lambda, cst.BaseComp)):
                return
            yield ancestor

    def _assigned_name(self, node: cst.CSTNode) -> Optional[cst.Assign]:
        """The assignment whose whole value is the expression around `node`."""
        top = node
        for ancestor in self._expression_chain(node):
            top = ancestor
        statement = self.index.parent(top)
        if isinstance(statement, cst.Assign) and statement.value is top and len(statement.targets) == 1:
            if isinstance(statement.targets[0].target, cst.Name):
                return statement
        return None

    def _reads_of(self, assign: cst.Assign) -> List[cst.Name]:
        name = assign.targets[0].target.value  # type: ignore[attr-defined]
        scope = self.values.scope(assign)
        found = []
        for read in scope.reads_after(name, assign):
            entry = scope.assignment_before(name, read)
            if entry is not None and entry[1] is assign:
                found.append(read)
        return found

    # Harm --------------------------------------------------------------------

    def weighs_itself(self, seed: cst.CSTNode, name: str) -> Optional[cst.BinaryOperation]:
        """The product (`*`, `/`, `**`, `@`) in which a value computed from
        `seed` scales a graph-carrying read of `name` itself."""
        frontier: List[cst.CSTNode] = [seed]
        for _ in range(_MAX_HOPS):
            following: List[cst.CSTNode] = []
            for use in frontier:
                child = use
                for ancestor in self._expression_chain(use):
                    if isinstance(ancestor, cst.BinaryOperation) and isinstance(ancestor.operator, _SCALING):
                        other = ancestor.right if child is ancestor.left else ancestor.left
                        if self._reads_with_graph(other, name):
                            return ancestor
                    child = ancestor
                assign = self._assigned_name(use)
                if assign is not None:
                    following.extend(self._reads_of(assign))
            frontier = following
        return None

    def _reads_with_graph(self, expr: cst.CSTNode, name: str) -> bool:
        reads = [expr] if isinstance(expr, cst.Name) else list(self.index.descendants(expr, cst.Name))
        return any(read.value == name and not graph_cut(read, self.index) for read in reads)

    def reaches_graph_output(self, expr: cst.CSTNode) -> bool:
        """Whether `expr` flows, in its function, into a backpropagated value
        or into what a module's `forward` (or `__call__`) returns."""
        if self.values.backwards_from(expr):
            return True
        scope = self.index.scope_of(expr)
        if not isinstance(scope, cst.FunctionDef) or scope.name.value not in ("forward", "__call__"):
            return False
        if self.facts.modules.class_of(scope) is None:
            return False
        values_scope = self.values.scope(scope)
        flowing = values_scope.flows_from(expr)
        for returned in self.index.descendants(scope.body, cst.Return):
            if returned.value is None or self.index.scope_of(returned) is not scope:
                continue
            if self.index.is_inside(expr, returned) or values_scope.reads_flow(returned.value, flowing):
                return True
        return False

    def carried_state_cut(self, seed: cst.Attribute) -> Optional[cst.Assign]:
        """`h = h.data.clone()` in a loop of a module's `forward`, when the
        loop writes graph values into `h` and `forward` returns it."""
        owner = seed.value
        if not isinstance(owner, cst.Name):
            return None
        node: cst.CSTNode = seed
        while True:  # `h.data.clone().float()`
            parent = self.index.parent(node)
            call = self.index.parent(parent) if isinstance(parent, cst.Attribute) else None
            if isinstance(call, cst.Call) and call.func is parent and parent.attr.value in COPYING_METHODS:
                node = call
            else:
                break
        assign = self.index.parent(node)
        if not (isinstance(assign, cst.Assign) and assign.value is node and len(assign.targets) == 1):
            return None
        target = assign.targets[0].target
        if not (isinstance(target, cst.Name) and target.value == owner.value):
            return None
        scope = self.index.scope_of(assign)
        if not isinstance(scope, cst.FunctionDef) or scope.name.value != "forward" or self.facts.modules.class_of(scope) is None:
            return None
        loop = self.index.enclosing(assign, (cst.For, cst.While))  # type: ignore[arg-type]
        if loop is None or not self.index.is_inside(loop, scope):
            return None
        if not self._graph_written_into(owner.value, loop):
            return None
        return assign if self.reaches_graph_output(assign.value) else None

    def _graph_written_into(self, name: str, loop: cst.CSTNode) -> bool:
        """`name[i] = v` in `loop` with `v` carrying a graph."""
        for assign in self.index.descendants(loop, cst.Assign):
            for target in assign.targets:
                t = target.target
                if isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name) and t.value.value == name:
                    if self.values.holds(assign.value) & GRAD:
                        return True
        return False

    def kept_alias(self, assign: cst.Assign, owner: cst.BaseExpression, edited_by_autograd: bool) -> Optional[cst.BaseExpression]:
        """Where the alias `assign` binds is stored to outlive the call (an
        attribute or item of `self`, or of a name bound to one), when the
        source is edited in place afterwards: by autograd for a `.grad`
        (`edited_by_autograd`), else by an in-place edit of `owner` later in
        the function. Returns the storing target."""
        if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
            return None
        for read in self._reads_of(assign):
            statement = self.index.parent(read)
            if not (isinstance(statement, cst.Assign) and statement.value is read):
                continue
            for target in statement.targets:
                if self._outlives_call(target.target) and (edited_by_autograd or self._edited_after(owner, statement)):
                    return target.target
        return None

    def _outlives_call(self, target: cst.BaseExpression) -> bool:
        if not isinstance(target, (cst.Subscript, cst.Attribute)):
            return False
        root = target
        while isinstance(root, (cst.Subscript, cst.Attribute)):
            root = root.value
        if not isinstance(root, cst.Name):
            return False
        if self.index.is_receiver(root):
            return True
        entry = self.values.scope(root).assignment_before(root.value, root)
        if entry is None or entry[2] is None or not isinstance(entry[1], cst.Assign):
            return False
        bound = entry[2]
        while isinstance(bound, (cst.Subscript, cst.Attribute)):
            bound = bound.value
        return self.index.is_receiver(bound) and bound is not entry[2]

    def _edited_after(self, owner: cst.BaseExpression, after: cst.CSTNode) -> bool:
        text = dotted(owner)
        if text is None:
            return False
        scope = self.index.scope_of(after)
        for edit in self.facts.shared("inplace", InplaceEdits).edits:
            if self.index.scope_of(edit.node) is scope and self.index.before(after, edit.node):
                if dotted(edit.target) in (text, text + ".data"):
                    return True
        return False
