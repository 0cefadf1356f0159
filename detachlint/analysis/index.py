"""The one traversal of a file: parents, source order and nodes by type.

Every other fact in `analysis/` is a query over this index, so a file is
walked once however many rules are enabled.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Dict, Iterator, List, Optional, Type, TypeVar

import libcst as cst

N = TypeVar("N", bound=cst.CSTNode)


class _Indexer(cst.CSTVisitor):
    def __init__(self, index: "FileIndex") -> None:
        self._index = index
        self._stack: List[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        index = self._index
        if self._stack:
            index.parents[node] = self._stack[-1]
        index.order[node] = len(index.order)
        index.by_type[type(node)].append(node)
        self._stack.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        self._stack.pop()
        self._index.end[original_node] = len(self._index.order)


class FileIndex:
    """Parent links, preorder positions and per-type node lists of one module."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.parents: Dict[cst.CSTNode, cst.CSTNode] = {}
        # Preorder number of each node, and one past the last number inside it:
        # `b` lies inside `a` exactly when order[a] < order[b] < end[a].
        self.order: Dict[cst.CSTNode, int] = {}
        self.end: Dict[cst.CSTNode, int] = {}
        self.by_type: Dict[type, List[cst.CSTNode]] = defaultdict(list)
        module.visit(_Indexer(self))

    def nodes(self, kind: Type[N]) -> List[N]:
        return self.by_type.get(kind, [])  # type: ignore[return-value]

    def parent(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        return self.parents.get(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        node = self.parents.get(node)
        while node is not None:
            yield node
            node = self.parents.get(node)

    def enclosing(self, node: cst.CSTNode, kind: Type[N]) -> Optional[N]:
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, kind):
                return ancestor
        return None

    def scope_of(self, node: cst.CSTNode) -> cst.CSTNode:
        """The innermost function around `node`, or the module."""
        for ancestor in self.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                return ancestor
        return self.module

    def descendants(self, node: cst.CSTNode, kind: Type[N]) -> Iterator[N]:
        """Nodes of `kind` inside `node`, in source order."""
        candidates = self.nodes(kind)
        start, end = self.order[node], self.end[node]
        # bisect by hand: `key=` needs Python 3.10.
        lo, hi = 0, len(candidates)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.order[candidates[mid]] <= start:
                lo = mid + 1
            else:
                hi = mid
        i = lo
        while i < len(candidates) and self.order[candidates[i]] < end:
            yield candidates[i]
            i += 1

    def is_inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        return self.order[container] < self.order[node] < self.end[container]

    def before(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        return self.order[a] < self.order[b]
