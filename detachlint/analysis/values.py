"""What each name holds, per function.

A small flow-sensitive view in source order: at a given node, a name holds
what its last assignment before that node in the same function (or, failing
that, at module level) produced: a model, an optimizer, a loss criterion, an
activation (a tensor computed by a differentiable operation), a loss, a
detached tensor, a tensor read through `.data`, a parameter, a leaf created
with `requires_grad=True`, or a plain number. Branches are merged by source
order, which is what a reader of the code assumes too.
"""

from __future__ import annotations

import re
from enum import Flag, auto
from typing import Dict, Iterator, List, Optional, Set, Tuple

import libcst as cst

from detachlint.analysis.grad_mode import GradMode
from detachlint.analysis.intent import Intent
from detachlint.analysis.index import FileIndex
from detachlint.analysis.modules import ModuleFacts
from detachlint.analysis.names import ImportTable, dotted


class Holds(Flag):
    NOTHING = 0
    MODEL = auto()
    OPTIMIZER = auto()
    CRITERION = auto()
    ACTIVATION = auto()
    LOSS = auto()
    DETACHED = auto()
    DATA = auto()
    PARAM = auto()
    LEAF = auto()
    NUMBER = auto()
    PACKED = auto()  # a PackedSequence: its `.data` is a field, not a cut


# Anything whose gradient autograd tracks.
GRAD = Holds.ACTIVATION | Holds.LOSS | Holds.PARAM | Holds.LEAF

MODEL_NAME = re.compile(
    r"(?:\w+_)?(?:model|net|network|encoder|decoder|generator|discriminator|critic|actor|"
    r"policy|backbone|classifier|teacher|student|unet|vae)"
    r"(?:_(?:ema|q|k|s|t|g|d|\d+|fp32|eval|copy|without_ddp))?|net[GD]|[GD]",
    re.I,
)
OPTIMIZER_NAME = re.compile(r"(?:\w+_)?(?:optimizer|optimiser|optim)(?:_\w+)?|opt_\w+|\w+_opt", re.I)
CRITERION_NAME = re.compile(r"(?:\w+_)?(?:criterion|loss_fn|loss_func|loss_function|lossfn)", re.I)

_CONVERSIONS = {
    "to", "cuda", "cpu", "float", "double", "half", "bfloat16", "type", "contiguous",
    "clone", "view", "reshape", "squeeze", "unsqueeze", "permute", "transpose", "flatten",
}
_MODEL_METHODS = {"train", "eval", "requires_grad_", "to", "cuda", "cpu", "float", "double", "half"}
_TO_NUMBER = {"item", "tolist", "numpy"}
# Tensor methods and torch functions whose result never requires grad
# (integer or boolean results, `Distribution.sample()` as opposed to
# `rsample()`): checked against torch 2.x, where `w.argmax().requires_grad`,
# `(w > 0).requires_grad` and `Normal(w, 1).sample().requires_grad` are False.
NO_GRAPH_METHODS = {
    "argmax", "argmin", "argsort", "eq", "ne", "lt", "le", "gt", "ge", "equal", "isnan", "isinf",
    "isfinite", "isclose", "nonzero", "long", "int", "bool", "byte", "short", "char", "logical_and",
    "logical_or", "logical_not", "logical_xor", "item", "tolist", "numpy", "detach", "size", "numel",
    "dim", "count_nonzero", "bincount", "unique", "all", "any", "sample", "multinomial",
}
NO_GRAPH_BUILTINS = {"len", "int", "float", "bool", "str", "round", "abs", "isinstance"}
NO_GRAPH_ATTRIBUTES = {"indices", "shape", "dtype", "device", "requires_grad", "is_leaf", "grad", "grad_fn", "ndim"}
FACTORIES = {
    "tensor", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "arange",
    "linspace", "eye", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
    "randn_like", "as_tensor", "from_numpy",
}
_FUNCTIONAL_LOSS = re.compile(
    r"torch\.nn\.functional\.(\w*loss|cross_entropy|nll_loss|binary_cross_entropy\w*|kl_div|"
    r"mse_loss|l1_loss|smooth_l1_loss|huber_loss|\w+_embedding_loss|ctc_loss)"
)


def is_packing(qualified: str) -> bool:
    """`pack_padded_sequence`, `pack_sequence`, `PackedSequence`: a packed
    batch, whose `.data` holds the packed values themselves."""
    head, _, last = qualified.rpartition(".")
    return head in ("torch.nn.utils.rnn", "torch.nn.utils.rnn.PackedSequence") and (
        last.startswith("pack") or last == "PackedSequence"
    )


def is_variable_read(name: cst.Name, parent: Optional[cst.CSTNode]) -> bool:
    """Whether this Name node reads a variable (not an attribute or keyword)."""
    if isinstance(parent, cst.Attribute) and parent.attr is name:
        return False
    if isinstance(parent, (cst.Arg, cst.Param)) and getattr(parent, "keyword", None) is name:
        return False
    if isinstance(parent, cst.Param) and parent.name is name:
        return False
    if isinstance(parent, (cst.FunctionDef, cst.ClassDef)) and parent.name is name:
        return False
    if isinstance(parent, (cst.AssignTarget, cst.ImportAlias, cst.AsName)):
        return False
    if isinstance(parent, (cst.For, cst.CompFor)) and parent.target is name:
        return False
    return True


# Reductions that return (values, indices): the indices are integers, no graph.
_VALUES_AND_INDICES = {"max", "min", "median", "mode", "sort", "topk", "kthvalue", "cummax", "cummin"}


def returns_indices_at(call: cst.BaseExpression, position: int) -> bool:
    """Whether element `position` of what `call` returns is an indices
    tensor: `torch.max(x, 1)[1]`, `_, idx = out.topk(5)`."""
    if position != 1 or not isinstance(call, cst.Call):
        return False
    func = call.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
    return name in _VALUES_AND_INDICES


def _unpacked_position(node: cst.CSTNode, name: str) -> Optional[int]:
    """The position at which `node` (an assignment) unpacks `name`."""
    if not isinstance(node, cst.Assign):
        return None
    for target in node.targets:
        t = target.target
        if isinstance(t, (cst.Tuple, cst.List)):
            for i, element in enumerate(t.elements):
                if isinstance(element.value, cst.Name) and element.value.value == name:
                    return i
    return None


def _unpacked_after_first(node: cst.CSTNode, name: str) -> bool:
    """Whether `node` binds `name` as a later element of a tuple unpacked from a call."""
    if isinstance(node, cst.Assign) and isinstance(node.value, (cst.Tuple, cst.List)):
        return False
    return (_unpacked_position(node, name) or 0) > 0


class ScopeValues:
    """Assignments of one function (or the module body), in source order."""

    def __init__(self, facts: "ValueFacts", scope: cst.CSTNode) -> None:
        self.facts = facts
        self.scope = scope
        self.assignments: Dict[str, List[Tuple[int, cst.CSTNode, Optional[cst.BaseExpression], Holds]]] = {}
        self._reads: Optional[Dict[str, List[cst.Name]]] = None
        self.params: Dict[str, Holds] = {}
        index = facts.index
        if isinstance(scope, cst.FunctionDef):
            for param in _all_params(scope.params):
                self.params[param.name.value] = facts.param_holds(param)
        for node in self._own_nodes():
            self._record(node)
        for entries in self.assignments.values():
            entries.sort(key=lambda entry: entry[0])

    def _own_nodes(self) -> Iterator[cst.CSTNode]:
        index = self.facts.index
        for kind in (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.NamedExpr):
            for node in index.descendants(self.scope, kind):
                if index.scopes[node] is self.scope:
                    yield node

    def _add(self, name: str, node: cst.CSTNode, value, holds: Holds = Holds.NOTHING) -> None:
        entry = (self.facts.index.order[node], node, value, holds)
        self.assignments.setdefault(name, []).append(entry)

    def _record(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Assign):
            for target in node.targets:
                self._bind(target.target, node, node.value)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            self._bind(node.target, node, node.value)
        elif isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name):
            self._add(node.target.value, node, node.value, Holds.NOTHING)
        elif isinstance(node, cst.NamedExpr) and isinstance(node.target, cst.Name):
            self._add(node.target.value, node, node.value)
        elif isinstance(node, cst.For):
            self._bind_loop(node.target, node, node.iter)

    @property
    def reads(self) -> Dict[str, List[cst.Name]]:
        """Every variable read in this scope, by name, in source order."""
        if self._reads is None:
            index = self.facts.index
            self._reads = {}
            for name in index.descendants(self.scope, cst.Name):
                if index.scopes[name] is self.scope and is_variable_read(name, index.parent(name)):
                    self._reads.setdefault(name.value, []).append(name)
        return self._reads

    def _bind(self, target, node, value) -> None:
        if isinstance(target, cst.Name):
            self._add(target.value, node, value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            values = None
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements):
                values = [e.value for e in value.elements]
            for i, element in enumerate(target.elements):
                self._bind(element.value, node, values[i] if values else value)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value, node, value)

    def _bind_loop(self, target, node, iterable) -> None:
        holds = Holds.NOTHING
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute):
            if iterable.func.attr.value in ("parameters", "named_parameters"):
                holds = Holds.PARAM
        for name in _target_names(target):
            self._add(name, node, None, holds)

    # Queries ---------------------------------------------------------------

    def assignment_before(self, name: str, at: cst.CSTNode):
        order = self.facts.index.order[at]
        found = None
        for entry in self.assignments.get(name, ()):
            node = entry[1]
            inside = self.facts.index.is_inside(at, node)
            # `x = f(x)` reads the old `x`; a loop body reads the loop's own target.
            if entry[0] < order and (not inside or (isinstance(node, cst.For) and self.facts.index.is_inside(at, node.body))):
                found = entry
            elif entry[0] >= order:
                break
        return found

    def reaching(self, read: cst.Name) -> List[Tuple[cst.CSTNode, Optional[cst.BaseExpression]]]:
        """(binding, value) of every assignment of `read`'s name that may
        reach it: walking back in source order, each one under a branch or
        loop the read is not in, up to the first that always runs before it.
        `assignment_before` gives only the last in source order."""
        index = self.facts.index
        order = index.order[read]
        found = []
        earlier = (e for e in self.assignments.get(read.value, ()) if e[0] < order and not index.is_inside(read, e[1]))
        for _, binding, value, _ in sorted(earlier, key=lambda e: e[0], reverse=True):
            found.append((binding, value))
            branch = next(
                (a for a in index.ancestors(binding) if isinstance(a, (cst.If, cst.Else, cst.For, cst.While, cst.Try))),
                None,
            )
            if branch is None or index.is_inside(read, branch):
                break
        return found

    def reads_after(self, name: str, node: cst.CSTNode) -> List[cst.Name]:
        end = self.facts.index.end[node]
        return [read for read in self.reads.get(name, ()) if self.facts.index.order[read] >= end]

    def flows_from(self, seed: cst.CSTNode) -> Set[cst.CSTNode]:
        """The assignments after `seed` that carry its value (and graph) on:
        their value contains `seed`, or reads a name whose binding at that
        read is one of them. A read where the graph is cut (`.detach()`,
        `.item()`, `.argmax()`, `.shape`, ...) carries nothing."""
        index = self.facts.index
        start = index.order[seed]
        found: Set[cst.CSTNode] = set()
        changed = True
        while changed:
            changed = False
            for entries in self.assignments.values():
                for _, node, value, _ in entries:
                    if node in found or value is None or index.end[node] <= start:
                        continue  # done before `seed`
                    if value is seed or index.is_inside(seed, value) or self.reads_flow(value, found):
                        found.add(node)
                        changed = True
        return found

    def reads_flow(self, expr: cst.CSTNode, flowing: Set[cst.CSTNode]) -> bool:
        """Whether `expr` reads, with its graph, a name bound by one of `flowing`."""
        index = self.facts.index
        for read in _reads_in(expr, index):
            if index.scopes.get(read) is not self.scope or graph_cut(read, index):
                continue
            entry = self.assignment_before(read.value, read)
            if entry is not None and entry[1] in flowing:
                return True
        return False

    def derived_names(self, name: str, before: cst.CSTNode) -> List[str]:
        """Names assigned, before `before`, from expressions that read `name`."""
        index = self.facts.index
        found: List[str] = []
        frontier = [name]
        while frontier:
            source = frontier.pop()
            for other, entries in self.assignments.items():
                if other in found or other == name:
                    continue
                for order, node, value, _ in entries:
                    if order >= index.order[before] or value is None:
                        continue
                    if any(r.value == source for r in index.descendants(value, cst.Name)) or (
                        isinstance(value, cst.Name) and value.value == source
                    ):
                        found.append(other)
                        frontier.append(other)
                        break
        return found


def detached_read(name: cst.Name, index: FileIndex) -> bool:
    parent = index.parent(name)
    return isinstance(parent, cst.Attribute) and parent.value is name and parent.attr.value in ("detach", "data")


# What carries no graph on from its receiver: `x.detach()`, `x.item()`,
# `x.argmax()`, `x.shape`; `torch.argmax(x)`, `len(x)`, `x == y`.
_CUTTING_ATTRIBUTES = NO_GRAPH_METHODS | NO_GRAPH_ATTRIBUTES | {"detach_", "data"}
_CUTTING_FUNCTIONS = {"len", "int", "float", "bool", "str", "round", "isinstance", "print", "type"}


def graph_cut(read: cst.Name, index: FileIndex) -> bool:
    """Whether the graph of `read` stops within its expression."""
    child: cst.CSTNode = read
    for ancestor in index.ancestors(read):
        if isinstance(ancestor, (cst.BaseStatement, cst.BaseSmallStatement, cst.Lambda)):
            return False
        if isinstance(ancestor, cst.Attribute) and ancestor.value is child and ancestor.attr.value in _CUTTING_ATTRIBUTES:
            return True
        if isinstance(ancestor, cst.Comparison):
            return True
        if isinstance(ancestor, cst.Call) and child is not ancestor.func:
            func = ancestor.func
            if isinstance(func, cst.Name) and func.value in _CUTTING_FUNCTIONS:
                return True
            if isinstance(func, cst.Attribute) and func.attr.value in ("argmax", "argmin", "argsort"):
                return True
        child = ancestor
    return False


def _reads_in(expr: cst.CSTNode, index: FileIndex) -> Iterator[cst.Name]:
    if isinstance(expr, cst.Name):
        yield expr
    yield from index.descendants(expr, cst.Name)


def _target_names(target) -> Iterator[str]:
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _target_names(target.value)


def _all_params(params: cst.Parameters) -> Iterator[cst.Param]:
    yield from params.posonly_params
    yield from params.params
    yield from params.kwonly_params
    if isinstance(params.star_arg, cst.Param):
        yield params.star_arg


class ValueFacts:
    def __init__(
        self, index: FileIndex, names: ImportTable, modules: ModuleFacts, grad_mode: GradMode, intent: "Intent"
    ) -> None:
        self.intent = intent
        self.index = index
        self.names = names
        self.modules = modules
        self.grad_mode = grad_mode
        self._scopes: Dict[cst.CSTNode, ScopeValues] = {}
        self._cache: Dict[cst.CSTNode, Holds] = {}
        self._busy: set = set()
        self._defined_names = {n.name.value for n in index.nodes(cst.FunctionDef)}
        self._defined_names |= {n.name.value for n in index.nodes(cst.ClassDef)}
        self._defined_names |= set(names.aliases)

    def defines(self, name: str) -> bool:
        """Whether the file binds `name` with `def`, `class` or `import`."""
        return name in self._defined_names

    def scope(self, node: cst.CSTNode) -> ScopeValues:
        scope = node if isinstance(node, (cst.FunctionDef, cst.Module)) else self.index.scope_of(node)
        if scope not in self._scopes:
            self._scopes[scope] = ScopeValues(self, scope)
        return self._scopes[scope]

    def param_holds(self, param: cst.Param) -> Holds:
        if param.annotation is not None:
            name = self.names.qualified(param.annotation.annotation) or ""
            if self.modules._is_nn_class(name) or name == "torch.nn.Module":
                return Holds.MODEL
            if name.startswith("torch.optim."):
                return Holds.OPTIMIZER
        return _holds_by_name(param.name.value)

    def backward_target(self, call: cst.Call) -> Optional[cst.BaseExpression]:
        """The tensor `call` backpropagates from: `x` in `x.backward()` and
        `torch.autograd.backward(x)`; None for any other call."""
        func = call.func
        if self.names.qualified(func) == "torch.autograd.backward":
            return call.args[0].value if call.args and call.args[0].keyword is None else None
        if isinstance(func, cst.Attribute) and func.attr.value == "backward" and self.names.qualified(func) is None:
            return func.value
        return None

    def backwards_from(self, seed: cst.CSTNode) -> List[cst.Call]:
        """The backward calls after `seed`, in its scope, that start from a
        tensor computed from `seed` (through names, not through `.detach()`)."""
        index = self.index
        scope = self.scope(seed)
        flowing = scope.flows_from(seed)
        found = []
        for call in index.descendants(index.scope_of(seed), cst.Call):
            target = self.backward_target(call)
            if target is None or not index.before(seed, call):
                continue
            if target is seed or index.is_inside(seed, target) or scope.reads_flow(target, flowing):
                found.append(call)
        return found

    def file_functions(self, call: cst.Call) -> List[cst.FunctionDef]:
        """The functions of this file `call` runs: `f(...)` and `self.f(...)`
        (resolved by `intent.helpers_called`), and `crit(...)` for
        `crit = Loss(...)` of a class here with `__call__` or `forward`."""
        direct = self.intent.helpers_called(call)
        if direct or not isinstance(call.func, cst.Name):
            return direct
        entries = self.scope(call.func).assignments.get(call.func.value, [])
        if len(entries) != 1 or not isinstance(entries[0][2], cst.Call):
            return []
        made_by = entries[0][2].func
        if not isinstance(made_by, cst.Name):
            return []
        for klass in self.index.nodes(cst.ClassDef):
            if klass.name.value == made_by.value:
                return [
                    f for f in klass.body.body
                    if isinstance(f, cst.FunctionDef) and f.name.value in ("__call__", "forward")
                ][:1]
        return []

    def _returns_without_graph(self, call: cst.Call, position: Optional[int], depth: int) -> bool:
        """Whether every return of the file function `call` runs gives, at
        `position` of a returned tuple (or as a whole), a value without graph."""
        functions = self.file_functions(call)
        if len(functions) != 1 or depth > 8:
            return False
        function = functions[0]
        returns = [r for r in self.index.descendants(function.body, cst.Return) if self.index.scope_of(r) is function]
        if not returns:
            return False
        for returned in returns:
            value = returned.value
            if value is None:
                return False
            if position is not None:
                if not isinstance(value, cst.Tuple) or position >= len(value.elements):
                    return False
                value = value.elements[position].value
            if not self.computed_without_graph(value, depth + 1):
                return False
        return True

    def grad_requested(self, name: str, scope: cst.CSTNode) -> bool:
        """Whether a backward in `scope` names `name` in its `inputs=`:
        `b.backward(inputs=[a])` fills `a.grad` even when `a` is no leaf."""
        for call in self.index.descendants(scope, cst.Call):
            if self.backward_target(call) is None:
                continue
            for arg in call.args:
                if arg.keyword is None or arg.keyword.value != "inputs":
                    continue
                value = arg.value
                elements = [e.value for e in value.elements] if isinstance(value, (cst.List, cst.Tuple)) else [value]
                if any(dotted(element) == name for element in elements):
                    return True
        return False

    def backpropagated_after(self, name: cst.Name, after: cst.CSTNode) -> bool:
        """Whether the value `name` holds is backpropagated after `after`:
        backward on it, or on something computed from it. "In the graph",
        proven by use."""
        scope = self.scope(name)
        entry = scope.assignment_before(name.value, name)
        if entry is None or entry[2] is None:
            return False
        return any(self.index.before(after, call) for call in self.backwards_from(entry[2]))

    def computed_without_graph(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """True only when every input of `expr` is known to carry no graph:
        `.detach()`, `.data`, numbers, torch factories without
        `requires_grad=True`, and what is computed from them (names are
        followed to their one assignment in the scope). Unknown is False."""
        if depth > 12:
            return False
        again = lambda inner: self.computed_without_graph(inner, depth + 1)  # noqa: E731
        if isinstance(expr, (cst.Integer, cst.Float)):
            return True
        if isinstance(expr, cst.UnaryOperation):
            return again(expr.expression)
        if isinstance(expr, cst.BinaryOperation):
            return again(expr.left) and again(expr.right)
        if isinstance(expr, cst.Attribute):
            return expr.attr.value == "data"
        if isinstance(expr, cst.Subscript):
            return again(expr.value)
        if isinstance(expr, (cst.Tuple, cst.List)):
            return all(again(element.value) for element in expr.elements)
        if isinstance(expr, cst.Name):
            entries = self.scope(expr).assignments.get(expr.value, [])
            if len(entries) != 1 or entries[0][0] >= self.index.order[expr]:
                return False  # reassigned, in a branch or a loop: not certain
            _, node, value, _ = entries[0]
            if isinstance(value, (cst.List, cst.Tuple, cst.Dict, cst.Set)):
                return False  # a container may be filled later
            if not isinstance(node, (cst.Assign, cst.AnnAssign)) or value is None:
                return False
            position = _unpacked_position(node, expr.value)
            if position is not None or (isinstance(value, cst.Call) and self.file_functions(value)):
                return isinstance(value, cst.Call) and self._returns_without_graph(value, position, depth)
            return again(value)
        if not isinstance(expr, cst.Call):
            return False
        positional = [arg.value for arg in expr.args if arg.keyword is None]
        qualified = self.names.qualified(expr.func)
        if qualified is None and isinstance(expr.func, cst.Attribute):
            method = expr.func.attr.value
            if method in ("detach", "detach_"):
                return True
            if method == "requires_grad_":
                return False
            return again(expr.func.value) and all(again(arg) for arg in positional)
        if qualified is None or not qualified.startswith("torch."):
            return False
        if any(arg.keyword is not None and arg.keyword.value == "requires_grad" for arg in expr.args):
            return False
        if qualified.rsplit(".", 1)[-1] in FACTORIES and qualified.count(".") == 1:
            return True
        return bool(positional) and all(again(arg) for arg in positional)

    # The core evaluation --------------------------------------------------

    def holds(self, expr: cst.CSTNode) -> Holds:
        """What `expr` evaluates to, as far as the file tells."""
        if expr in self._cache:
            return self._cache[expr]
        if expr in self._busy:
            return Holds.NOTHING
        self._busy.add(expr)
        try:
            result = self._evaluate(expr)
        finally:
            self._busy.discard(expr)
        self._cache[expr] = result
        return result

    def name_holds(self, name: str, at: cst.CSTNode) -> Holds:
        entry = None
        scope_node = self.index.scope_of(at)
        # Innermost scope first, then enclosing functions, then the module.
        while entry is None:
            scope = self.scope(scope_node)
            entry = scope.assignment_before(name, at)
            if entry is None and name in scope.params:
                return scope.params[name]
            if scope_node is self.index.module:
                break
            scope_node = self.index.scope_of(scope_node)
        if entry is None:
            if name == "self" and self.modules.class_of(at) is not None:
                return Holds.MODEL
            if name in self._defined_names:
                return Holds.NOTHING  # a function, class or import, not a model
            return _holds_by_name(name)
        _, node, value, holds = entry
        if value is None:
            return holds
        if returns_indices_at(value, _unpacked_position(node, name) or 0):
            return Holds.DETACHED  # `_, predicted = torch.max(outputs, 1)`: integer indices
        # `model = build_model(cfg)`: an unknown call; the name is the best hint.
        result = self.holds(value) or _holds_by_name(name)
        if result & Holds.LOSS and _unpacked_after_first(node, name):
            # `loss, sample_size, logs = criterion(model, batch)`: only the
            # first value of a loss function's tuple is the loss.
            result &= ~Holds.LOSS
        if isinstance(node, cst.AugAssign):
            previous = self.name_holds(name, node)
            result = previous | (result & GRAD)
        if result & GRAD and self.grad_mode.is_disabled(node):
            result = (result & ~GRAD) | Holds.DETACHED
        return result

    def _evaluate(self, expr: cst.CSTNode) -> Holds:
        if isinstance(expr, cst.Name):
            return self.name_holds(expr.value, expr)
        if isinstance(expr, cst.Attribute):
            return self._attribute(expr)
        if isinstance(expr, cst.Call):
            return self._call(expr)
        if isinstance(expr, cst.BinaryOperation):
            return _grad_union(self.holds(expr.left), self.holds(expr.right))
        if isinstance(expr, cst.UnaryOperation):
            return self.holds(expr.expression) & (GRAD | Holds.DETACHED)
        if isinstance(expr, cst.Subscript):
            index = expr.slice[0].slice if len(expr.slice) == 1 else None
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
                if returns_indices_at(expr.value, int(index.value.value)):
                    return Holds.DETACHED
            inner = self.holds(expr.value)
            if inner & (Holds.PARAM | Holds.LEAF):
                return Holds.ACTIVATION
            return inner
        if isinstance(expr, (cst.Tuple, cst.List)):
            result = Holds.NOTHING
            for element in expr.elements:
                result |= self.holds(element.value) & GRAD
            return result
        if isinstance(expr, cst.IfExp):
            return self.holds(expr.body) | self.holds(expr.orelse)
        if isinstance(expr, (cst.Integer, cst.Float)):
            return Holds.NUMBER
        return Holds.NOTHING

    def _attribute(self, expr: cst.Attribute) -> Holds:
        attr = expr.attr.value
        if attr == "data":
            if self.holds(expr.value) & Holds.PACKED:
                return Holds.NOTHING  # the packed values, with whatever graph they carry
            return Holds.DATA | Holds.DETACHED
        if attr in NO_GRAPH_ATTRIBUTES:
            return Holds.NOTHING
        if isinstance(expr.value, cst.Name) and expr.value.value == "self":
            owner = self.modules.class_of(expr)
            member = owner.members.get(attr) if owner else None
            if member is not None and member.kind == "parameter":
                # `nn.Parameter(t, requires_grad=False)`: a buffer in all but name.
                return Holds.PARAM if member.trainable else Holds.NOTHING
            if member is not None:
                return Holds.MODEL
            return _holds_by_name(attr)
        inner = self.holds(expr.value)
        if inner & Holds.MODEL:
            # `model.encoder`, `ddp_model.module`: a submodule; `model.generate`: not.
            return Holds.MODEL if attr == "module" or MODEL_NAME.fullmatch(attr) else Holds.NOTHING
        if inner & (Holds.ACTIVATION | Holds.LOSS):
            return Holds.LOSS | Holds.ACTIVATION if attr == "loss" else Holds.ACTIVATION
        return Holds.NOTHING

    def _call(self, call: cst.Call) -> Holds:
        func = call.func
        qualified = self.names.qualified(func)
        if qualified is not None and is_packing(qualified):
            return Holds.PACKED
        if isinstance(func, cst.Name) and func.value == "self" and self.modules.class_of(call) is not None:
            return Holds.ACTIVATION  # a module's own forward, `self(x)`
        if qualified is not None:
            return self._torch_call(call, qualified)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if self._attribute(func) & Holds.MODEL:
                return Holds.ACTIVATION  # a submodule's forward: `self.fc(x)`, `model.encoder(x)`
            receiver = self.holds(func.value)
            if method in ("detach", "detach_"):
                return Holds.DETACHED
            if method in _TO_NUMBER:
                return Holds.NUMBER
            if method == "parameters" and not call.args:
                return Holds.PARAM  # only modules have `.parameters()`, whatever the name
            if receiver & Holds.MODEL:
                if method in _MODEL_METHODS:
                    return Holds.MODEL
                if method == "forward":
                    return Holds.ACTIVATION
                if method in ("parameters", "named_parameters"):
                    return Holds.PARAM
                return Holds.NOTHING
            if receiver & Holds.CRITERION and method == "forward":
                return Holds.LOSS | Holds.ACTIVATION
            if receiver & GRAD:
                if receiver & (Holds.PARAM | Holds.LEAF) and method not in _CONVERSIONS:
                    return Holds.ACTIVATION
                kept = receiver & (Holds.LOSS | Holds.ACTIVATION)
                return kept or Holds.ACTIVATION
            if receiver & Holds.DETACHED:
                return Holds.DETACHED
            return Holds.NOTHING
        if isinstance(func, cst.Name):
            if func.value in ("float", "int", "bool", "len"):
                return Holds.NUMBER
            if func.value in self.modules.classes:
                return Holds.MODEL
            if _is_class_name(func.value):
                # `Model(envs)` with `Model` a class passed in: an instance, not a forward.
                return Holds.MODEL if self.holds(func) & Holds.MODEL else Holds.NOTHING
        callee = self.holds(func)
        if callee & Holds.MODEL:
            return Holds.ACTIVATION
        if callee & Holds.CRITERION:
            return Holds.LOSS | Holds.ACTIVATION
        return Holds.NOTHING

    def _torch_call(self, call: cst.Call, qualified: str) -> Holds:
        if not qualified.startswith("torch."):
            return Holds.NOTHING
        last = qualified.rsplit(".", 1)[-1]
        if self.modules.is_loss_constructor(call):
            return Holds.CRITERION
        if self.modules.is_module_constructor(call):
            return Holds.MODEL
        if qualified.startswith("torch.optim.") and last[:1].isupper():
            return Holds.OPTIMIZER
        if qualified == "torch.nn.Parameter":
            return Holds.PARAM
        args = _grad_union(*(self.holds(arg.value) for arg in call.args))
        if last in FACTORIES and qualified.count(".") == 1:
            for arg in call.args:
                if arg.keyword and arg.keyword.value == "requires_grad":
                    if isinstance(arg.value, cst.Name) and arg.value.value == "True":
                        return Holds.LEAF
            return Holds.NOTHING
        if _FUNCTIONAL_LOSS.fullmatch(qualified):
            return Holds.LOSS | Holds.ACTIVATION if args & GRAD else Holds.NOTHING
        return Holds.ACTIVATION if args & GRAD else (args & Holds.DETACHED)


def _grad_union(*kinds: Holds) -> Holds:
    result = Holds.NOTHING
    for kind in kinds:
        if kind & (Holds.PARAM | Holds.LEAF):
            result |= Holds.ACTIVATION
        result |= kind & (Holds.ACTIVATION | Holds.LOSS | Holds.DETACHED)
    if result & (Holds.ACTIVATION | Holds.LOSS):
        result &= ~Holds.DETACHED
    return result


def _is_class_name(name: str) -> bool:
    """CapWords (`Model`, `QNetwork`), not a GAN's one-letter `G` or `D`."""
    return name[:1].isupper() and any(c.islower() for c in name)


def _holds_by_name(name: str) -> Holds:
    if MODEL_NAME.fullmatch(name):
        return Holds.MODEL
    if OPTIMIZER_NAME.fullmatch(name):
        return Holds.OPTIMIZER
    if CRITERION_NAME.fullmatch(name):
        return Holds.CRITERION
    return Holds.NOTHING
