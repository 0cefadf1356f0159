"""The one traversal of a file: parents, source order, scopes, nodes by type.

Every other fact in `analysis/` is a query over this index, so a file is
walked once however many rules are enabled. The walk reads the tree's
fields directly instead of going through libcst's visitor, which rebuilds
every node it passes; whitespace and punctuation nodes are left out, since
no rule asks about them.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Dict, Iterator, List, Optional, Tuple, Type, TypeVar

import libcst as cst

from detachlint.analysis.priors import RECEIVER_NAMES

N = TypeVar("N", bound=cst.CSTNode)

# Fields that hold only whitespace, comments or punctuation.
_SKIPPED_FIELDS = {
    "lpar", "rpar", "comma", "dot", "semicolon", "leading_lines", "lines_after_decorators",
    "trailing_whitespace", "header", "footer", "equal", "colon", "lbracket", "rbracket",
    "lbrace", "rbrace", "operator", "asynchronous", "indent", "newline", "star", "walrus",
    "default_indent", "default_newline", "encoding", "has_trailing_newline", "relative",
    "import_alias", "lbrace_tok", "rbrace_tok", "arrow", "semicolon",
}
# Where the field order of the dataclass is not the order of the source.
_SOURCE_ORDER = {
    cst.FunctionDef: ("decorators", "name", "type_parameters", "params", "returns", "body"),
    cst.ClassDef: ("decorators", "name", "type_parameters", "bases", "keywords", "body"),
    cst.IfExp: ("body", "test", "orelse"),
    cst.Arg: ("keyword", "value"),
    cst.ExceptHandler: ("type", "name", "body"),
    cst.MatchCase: ("pattern", "guard", "body"),
}
if hasattr(cst, "ExceptStarHandler"):
    _SOURCE_ORDER[cst.ExceptStarHandler] = ("type", "name", "body")
_FIELDS: Dict[type, Tuple[str, ...]] = {}
_SCOPES = (cst.FunctionDef, cst.Lambda)


def _fields(kind: type) -> Tuple[str, ...]:
    fields = _FIELDS.get(kind)
    if fields is None:
        types = {f.name: f.type for f in dataclasses.fields(kind)}
        names = _SOURCE_ORDER.get(kind) or tuple(types)
        # A field declared as text (`Name.value`) never holds a node; one this
        # libcst does not have (`type_parameters` before 1.1) is left out.
        fields = tuple(n for n in names if n in types and n not in _SKIPPED_FIELDS and "whitespace" not in n and types[n] is not str)
        _FIELDS[kind] = fields
    return fields


_IS_NODE: Dict[type, bool] = {}
_IS_LEAF: Dict[type, bool] = {}


def _is_leaf(kind: type) -> bool:
    leaf = _IS_LEAF[kind] = not _fields(kind)
    return leaf


def hash_nodes_natively() -> None:
    """Give libcst's nodes `object.__hash__`.

    A node is equal only to itself and hashes by identity, but in a Python
    method that every lookup of a dict keyed by nodes calls, and the index
    and every fact are such dicts. `object.__hash__` keeps that contract in
    C: 5 % of a run's time on real code. Only detachlint's own processes
    call this (the command line, the language server, their workers), before
    any node is hashed; never an import, since a process that already keeps
    nodes in a dict would no longer find them."""
    if nodes_hash_natively():
        return
    python_hash = cst.CSTNode.__dict__["__hash__"]
    classes = [cst.CSTNode]
    while classes:
        kind = classes.pop()
        classes.extend(kind.__subclasses__())
        if kind.__dict__.get("__hash__") is python_hash:
            kind.__hash__ = object.__hash__  # type: ignore[method-assign]


def nodes_hash_natively() -> bool:
    """Whether this process called `hash_nodes_natively`."""
    return cst.CSTNode.__dict__["__hash__"] is object.__hash__


def _is_node(value: object) -> bool:
    # isinstance() against CSTNode, an ABC, is slow; one check per type is enough.
    kind = type(value)
    known = _IS_NODE.get(kind)
    if known is None:
        known = _IS_NODE[kind] = issubclass(kind, cst.CSTNode)
    return known


def children(node: cst.CSTNode) -> List[cst.CSTNode]:
    # Called once per node of every file: the lookups are inlined.
    out: List[cst.CSTNode] = []
    kind = type(node)
    fields = _FIELDS.get(kind) or _fields(kind)
    is_node = _IS_NODE.get
    for name in fields:
        value = getattr(node, name, None)
        value_type = type(value)
        if value_type is list or value_type is tuple:
            for item in value:
                known = is_node(type(item))
                if known or (known is None and _is_node(item)):
                    out.append(item)
        else:
            known = is_node(value_type)
            if known or (known is None and _is_node(value)):
                out.append(value)
    return out


def _decorator_name(decorator: cst.Decorator) -> Optional[str]:
    expr = decorator.decorator
    if isinstance(expr, cst.Call):
        expr = expr.func
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    return expr.value if isinstance(expr, cst.Name) else None


def _first_param(function: cst.FunctionDef) -> Optional[str]:
    first = function.params.posonly_params or function.params.params
    return first[0].name.value if first else None


def _bound_names(scope: cst.CSTNode) -> set:
    """The parameters of a function or lambda (what a nested scope may rebind)."""
    params = scope.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    every += [p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]
    return {p.name.value for p in every}


class FileIndex:
    """Parent links, preorder numbers, scopes and per-type node lists of one module."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self.parents: Dict[cst.CSTNode, cst.CSTNode] = {}
        # Preorder number of each node, and one past the last number inside it:
        # `b` lies inside `a` exactly when order[a] < order[b] < end[a].
        self.order: Dict[cst.CSTNode, int] = {}
        self.end: Dict[cst.CSTNode, int] = {}
        # The innermost function (or lambda, or the module) each node runs in.
        self.scopes: Dict[cst.CSTNode, cst.CSTNode] = {}
        self.by_type: Dict[type, List[cst.CSTNode]] = defaultdict(list)
        self._receivers: Dict[cst.CSTNode, Optional[str]] = {}
        self._walk(module)

    def _walk(self, module: cst.Module) -> None:
        order, end, parents, scopes, by_type = self.order, self.end, self.parents, self.scopes, self.by_type
        is_leaf = _IS_LEAF.get
        # Nodes to enter, each node's children followed by a None that closes it.
        stack: List[Optional[cst.CSTNode]] = [module]
        path: List[cst.CSTNode] = []  # the nodes entered and not yet closed, outermost first
        scope_path: List[cst.CSTNode] = [module]
        while stack:
            node = stack.pop()
            if node is None:
                closed = path.pop()
                end[closed] = len(order)
                if type(closed) in _SCOPES:
                    scope_path.pop()
                continue
            kind = type(node)
            order[node] = len(order)
            by_type[kind].append(node)
            scopes[node] = scope_path[-1]
            if path:
                parents[node] = path[-1]
            leaf = is_leaf(kind)
            if leaf or (leaf is None and _is_leaf(kind)):  # a name, a number: nothing inside
                end[node] = len(order)
                continue
            path.append(node)
            if kind in _SCOPES:
                scope_path.append(node)
            stack.append(None)
            inner = children(node)
            inner.reverse()
            stack.extend(inner)

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
        """The innermost function or lambda around `node`, or the module."""
        return self.scopes.get(node, self.module)

    def receiver(self, node: cst.CSTNode) -> Optional[str]:
        """The name the method around `node` gives its instance (or class, in a
        classmethod): its first parameter, whatever it is called. Functions
        and lambdas nested in a method see the method's, unless they bind the
        same name themselves. None outside methods and in static methods."""
        scope = node if isinstance(node, _SCOPES) else self.scope_of(node)
        if scope in self._receivers:
            return self._receivers[scope]
        found: Optional[str] = None
        if isinstance(scope, cst.FunctionDef) and self.is_method(scope):
            found = self.instance_param(scope)
        elif isinstance(scope, cst.FunctionDef) and _first_param(scope) in RECEIVER_NAMES:
            found = _first_param(scope)  # a prior: a method cut out of its class
        elif scope is not self.module:
            outer = self.receiver(self.scope_of(scope))
            found = None if outer is None or outer in _bound_names(scope) else outer
        self._receivers[scope] = found
        return found

    def instance_param(self, function: cst.CSTNode) -> Optional[str]:
        """The first parameter of a method (not a static one): its instance or class."""
        if not isinstance(function, cst.FunctionDef) or not self.is_method(function):
            return None
        if any(_decorator_name(d) == "staticmethod" for d in function.decorators):
            return None
        return _first_param(function)

    def is_receiver(self, expr: cst.CSTNode) -> bool:
        """`expr` is the name of the instance (or class) of the method it is in."""
        return isinstance(expr, cst.Name) and expr.value == self.receiver(expr)

    def is_method(self, function: cst.FunctionDef) -> bool:
        """`function` is defined directly in a class body."""
        body = self.parents.get(function)
        return body is not None and isinstance(self.parents.get(body), cst.ClassDef)

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
        while lo < len(candidates) and self.order[candidates[lo]] < end:
            yield candidates[lo]
            lo += 1

    def calls_in(self, scope: cst.CSTNode) -> List[cst.Call]:
        """The calls a function's body makes (with those of the functions nested
        in it), or the module's own top-level code makes (not its functions')."""
        if isinstance(scope, (cst.FunctionDef, cst.Lambda)):
            return list(self.descendants(scope.body, cst.Call))
        return [c for c in self.nodes(cst.Call) if self.scopes.get(c) is scope]

    def is_inside(self, node: cst.CSTNode, container: cst.CSTNode) -> bool:
        return self.order[container] < self.order[node] < self.end[container]

    def before(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        return self.order[a] < self.order[b]
