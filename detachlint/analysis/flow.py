"""Control flow of one scope, and the bindings that reach each point of it.

A scope's statements become points joined by the edges Python runs:
both arms of an `if`, a loop's body back to its head and out through its
`else` or a `break`, `continue` to the head, `return` and `raise` out of
the scope, any statement of a `try` body into its handlers, a class body
run where the class statement stands. Which bindings reach each point is
then solved to a fixpoint over those edges (reaching definitions, one bit
per binding), so a binding in one arm of an `if` reaches past it, a
binding followed by `break` does not reach the rest of the loop body, and
a binding late in a loop body reaches its start on the next pass.
"""

from __future__ import annotations

import bisect
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import libcst as cst

from detachlint.analysis.index import FileIndex

_STATEMENT_LISTS = (cst.SimpleStatementLine, cst.SimpleStatementSuite)
_TRIES = (cst.Try, cst.TryStar) if hasattr(cst, "TryStar") else (cst.Try,)


class _Loop:
    def __init__(self, head: int) -> None:
        self.head = head
        self.breaks: List[int] = []


class ScopeFlow:
    """The points of one scope (small statements, and the heads of compound
    statements), their predecessors, and the bindings reaching each."""

    def __init__(self, index: FileIndex, scope: cst.CSTNode, bindings: Sequence[Tuple[str, cst.CSTNode]]) -> None:
        self.index = index
        self.points: List[cst.CSTNode] = []
        self.preds: List[List[int]] = []
        self.point_of: Dict[cst.CSTNode, int] = {}
        self._loops: List[_Loop] = []
        self._by_order: Optional[List[Tuple[int, int]]] = None
        if isinstance(scope, cst.Module):
            self._block(scope.body, [])
        elif isinstance(scope, cst.FunctionDef):
            self._block(_statements(scope.body), [])
        else:  # a lambda: one expression
            self._point(scope, [])
        self._solve(bindings)

    # Building the graph ------------------------------------------------------

    def _point(self, node: cst.CSTNode, preds: Iterable[int]) -> int:
        self.point_of[node] = len(self.points)
        self.points.append(node)
        self.preds.append(list(preds))
        return len(self.points) - 1

    def _block(self, statements: Sequence[cst.CSTNode], preds: List[int]) -> List[int]:
        for statement in statements:
            preds = self._statement(statement, preds)
        return preds

    def _statement(self, node: cst.CSTNode, preds: List[int]) -> List[int]:
        if isinstance(node, _STATEMENT_LISTS):
            for small in node.body:
                point = self._point(small, preds)
                preds = [point]
                if isinstance(small, (cst.Return, cst.Raise)):
                    preds = []
                elif isinstance(small, cst.Break) and self._loops:
                    self._loops[-1].breaks.append(point)
                    preds = []
                elif isinstance(small, cst.Continue) and self._loops:
                    self.preds[self._loops[-1].head].append(point)
                    preds = []
            return preds
        if isinstance(node, cst.If):
            test = self._point(node, preds)
            out = self._block(_statements(node.body), [test])
            if isinstance(node.orelse, cst.If):
                return out + self._statement(node.orelse, [test])
            if isinstance(node.orelse, cst.Else):
                return out + self._block(_statements(node.orelse.body), [test])
            return out + [test]
        if isinstance(node, cst.For):
            # The iterable is evaluated once, before the loop; the head binds
            # the target on every pass.
            start = self._point(node.iter, preds)
            return self._loop(node, [start])
        if isinstance(node, cst.While):
            return self._loop(node, preds)
        if isinstance(node, _TRIES):
            return self._try(node, preds)
        if isinstance(node, cst.With):
            return self._block(_statements(node.body), [self._point(node, preds)])
        if isinstance(node, cst.ClassDef):
            # A class body runs once, where the class statement stands.
            return self._block(_statements(node.body), [self._point(node, preds)])
        if isinstance(node, cst.Match):
            subject = self._point(node, preds)
            out = [subject]  # no case matched
            for case in node.cases:
                out += self._block(_statements(case.body), [self._point(case, [subject])])
            return out
        # A nested `def`, or a statement no other branch knows: one point.
        return [self._point(node, preds)]

    def _loop(self, node: cst.CSTNode, preds: List[int]) -> List[int]:
        head = self._point(node, preds)
        loop = _Loop(head)
        self._loops.append(loop)
        body_end = self._block(_statements(node.body), [head])
        self._loops.pop()
        self.preds[head].extend(body_end)
        # `while True:` leaves only by `break`.
        exhausted = [] if isinstance(node, cst.While) and _is_true(node.test) else [head]
        if node.orelse is not None:
            exhausted = self._block(_statements(node.orelse.body), exhausted) if exhausted else []
        return exhausted + loop.breaks

    def _try(self, node: cst.CSTNode, preds: List[int]) -> List[int]:
        first = len(self.points)
        body_end = self._block(_statements(node.body), preds)
        # Any statement of the body may raise into a handler.
        raising = preds + list(range(first, len(self.points)))
        out: List[int] = []
        for handler in node.handlers:
            out += self._block(_statements(handler.body), [self._point(handler, raising)])
        if node.orelse is not None:
            body_end = self._block(_statements(node.orelse.body), body_end)
        out += body_end
        if node.finalbody is not None:
            # Reached normally, and by whatever the body raised and no handler took.
            out = self._block(_statements(node.finalbody.body), out + raising)
        return out

    # Solving -----------------------------------------------------------------

    def _solve(self, bindings: Sequence[Tuple[str, cst.CSTNode]]) -> None:
        """Reaching bindings: IN[p] is the union of OUT over p's
        predecessors; OUT[p] adds p's bindings and drops the others of the
        same names. `bindings` are (name, node) pairs, one bit each."""
        self.bindings = [node for _, node in bindings]
        count = len(self.points)
        gen = [0] * count
        named: Dict[str, int] = {}
        for bit, (name, _) in enumerate(bindings):
            named[name] = named.get(name, 0) | (1 << bit)
        kill = [0] * count
        for bit, (name, node) in enumerate(bindings):
            point = self.point_at(node)
            if point is not None:
                gen[point] |= 1 << bit
                kill[point] |= named[name]
        self.at_point = gen
        self.named = named
        ins = [0] * count
        outs = [0] * count
        changed = True
        while changed:  # points are numbered in source order: few passes
            changed = False
            for point in range(count):
                into = 0
                for pred in self.preds[point]:
                    into |= outs[pred]
                out = gen[point] | (into & ~kill[point])
                if out != outs[point] or into != ins[point]:
                    ins[point], outs[point] = into, out
                    changed = True
        self.ins = ins

    # Queries -----------------------------------------------------------------

    def point_at(self, node: cst.CSTNode) -> Optional[int]:
        """The point that runs `node`: the innermost small statement or
        compound head around it; for a line or a block, its first point."""
        point = self.point_of.get(node)
        if point is not None:
            return point
        if not isinstance(node, cst.BaseExpression):
            point = self._first_inside(node)
            if point is not None:
                self.point_of[node] = point
                return point
        for ancestor in self.index.ancestors(node):
            point = self.point_of.get(ancestor)
            if point is not None:
                self.point_of[node] = point
                return point
        return None

    def _first_inside(self, node: cst.CSTNode) -> Optional[int]:
        if self._by_order is None:
            self._by_order = sorted((self.index.order[p], i) for i, p in enumerate(self.points))
        start, end = self.index.order[node], self.index.end[node]
        at = bisect.bisect_left(self._by_order, (start, -1))
        if at < len(self._by_order) and self._by_order[at][0] < end:
            return self._by_order[at][1]
        return None

    def reaching(self, at: cst.CSTNode, name: str) -> List[int]:
        """Indexes (into `bindings`) of the bindings of `name` that may be
        what a read at `at` sees; none when `at` is not in this flow. A
        binding in the same statement counts when it comes first (a walrus
        before the read); the statement's own assignment does not."""
        point = self.point_at(at)
        named = self.named.get(name, 0)
        if point is None or not named:
            return []
        bits = self.ins[point] & named
        same = self.at_point[point] & named
        if same:
            order = self.index.order[at]
            for bit in _bits(same):
                binding = self.bindings[bit]
                if self.index.order[binding] < order and not self.index.is_inside(at, binding) and binding is not at:
                    bits |= 1 << bit
        return list(_bits(bits))


def _bits(mask: int) -> Iterable[int]:
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _statements(body: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """The statements of an indented block, or the one line of `if c: x = 1`."""
    if isinstance(body, cst.SimpleStatementSuite):
        return [body]
    return body.body


def _is_true(test: cst.BaseExpression) -> bool:
    return (isinstance(test, cst.Name) and test.value == "True") or (isinstance(test, cst.Integer) and test.value != "0")
