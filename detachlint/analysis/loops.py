"""Loops and what flows through them: accumulators, backward, optimizer steps.

Answers the questions the graph-lifetime and training-loop rules share:
which loops enclose a node; whether a statement accumulates a value across
the iterations of a loop (`total += loss`, `total = total + loss`,
`losses.append(loss)`, `history[k].append(out)`) and across which loops;
whether an accumulator (or anything computed from it) is backpropagated,
returned or otherwise handed on; whether an expression can still carry an
autograd graph (`out.argmax(1)`, `pred == y` cannot); and whether a loop
calls `backward()`, steps an optimizer, or zeroes gradients.

Reached from rules as `facts.shared("loops", LoopFacts)`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, FrozenSet, Iterator, List, Optional, Set, Tuple, Union

import libcst as cst

from detachlint.analysis.intent import is_abstract
from detachlint.analysis.names import dotted, unpacked_position
from detachlint.analysis.values import GRAD, Holds, graph_cut, is_variable_read
from detachlint.analysis.vocabulary import (
    BACKWARD_METHODS,
    DETACHING_METHODS,
    GRADIENT_FUNCTIONS,
    GRAD_CLEARING_METHODS,
    INSPECTING_BUILTINS,
    NO_GRAPH_ATTRIBUTES,
    NO_GRAPH_BUILTINS,
    NO_GRAPH_METHODS,
    OPTIMIZER_STEPS,
    STORING_METHODS,
    TO_PYTHON_METHODS,
)
from detachlint.analysis.priors import DATA_ITERABLE_NAME, ZEROING_NAME

if TYPE_CHECKING:  # pragma: no cover
    from detachlint.analysis import Facts

Loop = Union[cst.For, cst.While]

# Calls whose result keeps nothing of the receiver's graph.
_LEAVING_GRAPH = DETACHING_METHODS | TO_PYTHON_METHODS


@dataclass(frozen=True)
class Accumulation:
    """A statement that adds to a value kept across loop iterations."""

    node: cst.CSTNode  # the AugAssign, Assign or `.append(...)` Call
    target: str  # the accumulator as written: `running_loss`, `self.losses`, `history[k]`
    key: str  # what reads of the accumulator look like: `running_loss`, `self.losses`, `history`
    value: cst.BaseExpression  # what each iteration adds
    kind: str  # "augmented" (`a += v`), "rebind" (`a = a + v`), "append" (`a.append(v)`)
    loops: Tuple[Loop, ...]  # the loops it accumulates across, innermost first


def _key(expr: cst.BaseExpression) -> Optional[str]:
    """`a` for `a`, `a[i]`, `a[i][j]`; `self.x` for `self.x` and `self.x[i]`."""
    while isinstance(expr, cst.Subscript):
        expr = expr.value
    return dotted(expr)


def _target_keys(target: cst.BaseExpression) -> Iterator[str]:
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_keys(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _target_keys(target.value)
    else:
        key = _key(target)
        if key is not None:
            yield key


# Steps one `carries_graph_from_callers` question may take: keeps the cost
# of a file linear in its size, whatever its call graph.
_FROM_CALLERS_BUDGET = 400


def _function_params(function: cst.FunctionDef) -> Iterator[cst.Param]:
    params = function.params
    yield from params.posonly_params
    yield from params.params
    yield from params.kwonly_params
    if isinstance(params.star_arg, cst.Param):
        yield params.star_arg


def _names_in(expr: cst.CSTNode, index) -> List[cst.Name]:
    return ([expr] if isinstance(expr, cst.Name) else []) + list(index.descendants(expr, cst.Name))


def _callee_name(call: cst.Call) -> Optional[str]:
    func = call.func
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return None


class LoopFacts:
    def __init__(self, facts: "Facts") -> None:
        self.facts = facts
        self.index = facts.index
        self._keys_read: Dict[cst.CSTNode, FrozenSet[str]] = {}
        self._derived: Dict[Tuple[cst.CSTNode, str], FrozenSet[str]] = {}
        self._bindings: Dict[cst.CSTNode, List[Tuple[Tuple[str, ...], Tuple[cst.CSTNode, ...]]]] = {}
        self._zeroing_functions: Optional[Set[str]] = None
        self._loop_calls: Optional[Dict[cst.FunctionDef, List[Tuple[cst.Call, Loop]]]] = None
        self._accumulated: Dict[cst.FunctionDef, Dict[str, Accumulation]] = {}
        self._methods: Optional[Dict[str, List[cst.FunctionDef]]] = None
        self._bound: Dict[cst.Param, cst.BaseExpression] = {}
        self._callee_cache: Dict[cst.Call, List[cst.FunctionDef]] = {}
        self._budget = _FROM_CALLERS_BUDGET

    # Loops ------------------------------------------------------------------

    def enclosing_loops(self, node: cst.CSTNode) -> List[Loop]:
        """Loops of the same function whose body holds `node`, innermost first."""
        loops: List[Loop] = []
        for ancestor in self.index.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                break
            if isinstance(ancestor, (cst.For, cst.While)) and self.index.is_inside(node, ancestor.body):
                loops.append(ancestor)
        return loops

    def iterates_data(self, loop: Loop) -> bool:
        """A `for` over a data loader or batches: `for x, y in tqdm(train_loader)`."""
        if not isinstance(loop, cst.For):
            return False
        iterable = loop.iter
        # Look through `enumerate(...)`, `tqdm(...)`, `zip(...)`, not into `range(len(...))`.
        while isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.args:
            if iterable.func.value in ("range", "len"):
                return False
            iterable = iterable.args[0].value
        name = iterable.func if isinstance(iterable, cst.Call) else iterable
        if isinstance(name, cst.Attribute):
            name = name.attr
        return isinstance(name, cst.Name) and bool(DATA_ITERABLE_NAME.search(name.value))

    def trains(self, loop: Loop) -> bool:
        """Whether the loop calls backward or steps an optimizer."""
        return bool(self.backward_calls(loop) or self.optimizer_steps(loop))

    # Accumulation -----------------------------------------------------------

    def accumulation(self, node: cst.CSTNode) -> Optional[Accumulation]:
        """The accumulation `node` performs across loop iterations, if any."""
        found = self._accumulation_parts(node)
        if found is None:
            return None
        target, value, kind = found
        key = _key(target)
        if key is None:
            return None
        loops: List[Loop] = []
        for loop in self.enclosing_loops(node):
            if self._reset_before(key, node, loop):
                break
            loops.append(loop)
        if not loops:
            return None
        text = self.facts.module.code_for_node(target)
        return Accumulation(node, text, key, value, kind, tuple(loops))

    def state_accumulation(self, node: cst.CSTNode, in_loops: bool = False) -> Optional[Accumulation]:
        """An accumulation into the state of an object, in one of its methods
        (`self.cost_his.append(loss)`, `self.total += loss`,
        `self.sums[k] += v`): every call of the method adds to what the object
        keeps. Outside the method's loops unless `in_loops` (a loop there runs
        within one call; `accumulation` covers a loop's own iterations).
        None when the method binds the state afresh: nothing outlives the call."""
        found = self._accumulation_parts(node)
        if found is None:
            return None
        target, value, kind = found
        key = _key(target)
        method = self.index.scope_of(node)
        receiver = self.index.receiver(node)
        if key is None or receiver is None or not key.startswith(receiver + ".") or not isinstance(method, cst.FunctionDef):
            return None
        if method.name.value == "__init__" or self.index.enclosing(method, cst.ClassDef) is None:
            return None
        if not in_loops and self.enclosing_loops(node):
            return None
        for keys, sources, binder in self._bindings_in(method.body):
            if key in keys and isinstance(binder, (cst.Assign, cst.AnnAssign)) and binder is not node:
                if not any(key in self.keys_read(source) for source in sources):
                    return None
        return Accumulation(node, self.facts.module.code_for_node(target), key, value, kind, ())

    def accumulated_parameters(self, function: cst.FunctionDef) -> Dict[str, Accumulation]:
        """Parameters of a method that it adds, with their graphs, to the
        object's state (`def update(self, values): ... self._sum[i] += v` for
        `v` in `values`), each with the accumulation that keeps it."""
        cached = self._accumulated.get(function)
        if cached is not None:
            return cached
        found: Dict[str, Accumulation] = {}
        params = [p.name.value for p in function.params.params if p.name.value != self.index.instance_param(function)]
        if params and function.name.value != "__init__":
            nodes = [*self.index.descendants(function.body, cst.AugAssign), *self.index.descendants(function.body, cst.Assign)]
            nodes += [c for c in self.index.descendants(function.body, cst.Call) if _callee_name(c) == "append"]
            for node in nodes:
                if self.index.scope_of(node) is not function:
                    continue
                accumulation = self.state_accumulation(node, in_loops=True)
                if accumulation is None or self.has_no_graph(accumulation.value):
                    continue  # `self.logs.append("|".join(...))`: text, counts
                for param in params:
                    if param in found:
                        continue
                    derived = self.derived(param, function)
                    reads = [n for n in _names_in(accumulation.value, self.index) if n.value in derived]
                    if any(not graph_cut(read, self.index) for read in reads):
                        found[param] = accumulation
        self._accumulated[function] = found
        return found

    def method_called(self, call: cst.Call) -> Optional[cst.FunctionDef]:
        """The method of a class of this file that `obj.name(...)` runs:
        `self.name` as `intent.helpers_called` resolves it, else the one
        method of that name among the file's classes (duck typing, as Python
        resolves it at run time), if exactly one class defines it."""
        func = call.func
        if not isinstance(func, cst.Attribute):
            return None
        direct = self.facts.intent.helpers_called(call)
        if direct:
            return direct[0] if len(direct) == 1 else None
        if self._methods is None:
            self._methods = {}
            for klass in self.index.nodes(cst.ClassDef):
                for statement in klass.body.body:
                    if isinstance(statement, cst.FunctionDef):
                        self._methods.setdefault(statement.name.value, []).append(statement)
        candidates = self._methods.get(func.attr.value, [])
        return candidates[0] if len(candidates) == 1 else None

    def _accumulation_parts(self, node: cst.CSTNode):
        if isinstance(node, cst.AugAssign) and isinstance(node.operator, cst.AddAssign):
            return node.target, node.value, "augmented"
        if isinstance(node, cst.Assign) and len(node.targets) == 1:
            target = node.targets[0].target
            value = node.value
            if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
                text = dotted(target)
                if text is not None and dotted(value.left) == text:
                    return target, value.right, "rebind"
                if text is not None and dotted(value.right) == text:
                    return target, value.left, "rebind"
                # `stats["loss"] = stats.get("loss", 0) + loss`: the entry read back and added to.
                code = self.facts.module.code_for_node
                if isinstance(target, cst.Subscript) and len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index):
                    for read, added in ((value.left, value.right), (value.right, value.left)):
                        if (
                            isinstance(read, cst.Call) and isinstance(read.func, cst.Attribute) and read.func.attr.value == "get"
                            and read.args and code(read.func.value) == code(target.value)
                            and code(read.args[0].value) == code(target.slice[0].slice.value)
                        ):
                            return target, added, "rebind"
            return None
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "append":
            if len(node.args) == 1 and node.args[0].keyword is None and node.args[0].star == "":
                if isinstance(self.index.parent(node), cst.Expr):
                    receiver = node.func.value
                    if isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute) and receiver.func.attr.value == "setdefault":
                        # `history.setdefault("loss", []).append(loss)`: a list kept in `history`.
                        return receiver.func.value, node.args[0].value, "append"
                    return receiver, node.args[0].value, "append"
        return None

    def _resets(self, key: str, node: cst.CSTNode, loop: Loop) -> Iterator[cst.CSTNode]:
        """Where the loop's body binds `key` afresh, in source order
        (`total = 0`, `losses = []`, `losses.clear()`, `for total in ...`),
        `node` itself and what holds it aside."""
        index = self.index
        found = []
        for keys, sources, binder in self._bindings_in(loop):
            if key not in keys or binder is node or index.is_inside(node, binder):
                continue
            if isinstance(binder, (cst.AugAssign, cst.Call)):
                continue  # adds to the old value
            if not any(key in self.keys_read(source) for source in sources):
                found.append(binder)
        for call in index.descendants(loop.body, cst.Call):
            if isinstance(call.func, cst.Attribute) and call.func.attr.value == "clear" and _key(call.func.value) == key:
                found.append(call)
        return iter(sorted(found, key=index.order.__getitem__))

    def _reset_before(self, key: str, node: cst.CSTNode, loop: Loop) -> bool:
        order = self.index.order[node]
        return any(self.index.order[reset] < order for reset in self._resets(key, node, loop))

    def reset_later(self, accumulation: Accumulation) -> Optional[cst.CSTNode]:
        """Where the innermost loop it accumulates across empties the
        accumulator after adding to it (`if step % 100 == 0: running = 0`):
        the graphs kept live only until then."""
        order = self.index.order[accumulation.node]
        for reset in self._resets(accumulation.key, accumulation.node, accumulation.loops[0]):
            if self.index.order[reset] > order:
                return reset
        return None

    # Reads and flows ------------------------------------------------------

    def keys_read(self, expr: cst.CSTNode) -> FrozenSet[str]:
        """Variable names and dotted attributes (`self.losses`) `expr` reads."""
        cached = self._keys_read.get(expr)
        if cached is None:
            found = set()
            nodes = [expr] if isinstance(expr, (cst.Name, cst.Attribute)) else []
            nodes += list(self.index.descendants(expr, cst.Name)) + list(self.index.descendants(expr, cst.Attribute))
            for node in nodes:
                if isinstance(node, cst.Name):
                    if is_variable_read(node, self.index.parent(node)):
                        found.add(node.value)
                else:
                    text = dotted(node)
                    if text is not None:
                        found.add(text)
            cached = self._keys_read[expr] = frozenset(found)
        return cached

    def _bindings_in(self, container: cst.CSTNode) -> Iterator[Tuple[Tuple[str, ...], Tuple[cst.CSTNode, ...], cst.CSTNode]]:
        """(keys bound, expressions they come from, binding node) inside `container`."""
        index = self.index
        for node in index.descendants(container, cst.Assign):
            keys = tuple(k for t in node.targets for k in _target_keys(t.target))
            yield keys, (node.value,), node
        for node in index.descendants(container, cst.AnnAssign):
            if node.value is not None:
                yield tuple(_target_keys(node.target)), (node.value,), node
        for node in index.descendants(container, cst.AugAssign):
            yield tuple(_target_keys(node.target)), (node.value,), node
        for node in index.descendants(container, cst.NamedExpr):
            yield tuple(_target_keys(node.target)), (node.value,), node
        for node in index.descendants(container, cst.For):
            yield tuple(_target_keys(node.target)), (node.iter,), node
        for node in index.descendants(container, cst.WithItem):
            if node.asname is not None:
                yield tuple(_target_keys(node.asname.name)), (node.item,), node
        for node in index.descendants(container, cst.Call):
            # `outs.append(x)`, `d.update(x)`, `outs.extend(x)`: the container now holds x.
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in STORING_METHODS:
                key = _key(node.func.value)
                if key is not None and node.args:
                    yield (key,), tuple(arg.value for arg in node.args), node

    def is_assigned_in(self, key: str, container: cst.CSTNode) -> bool:
        """Whether an assignment inside `container` binds `key` (`opt = ...`, `self.opt = ...`)."""
        for node in self.index.descendants(container, cst.Assign):
            if any(key in _target_keys(t.target) for t in node.targets):
                return True
        return False

    def derived(self, key: str, scope: cst.CSTNode) -> FrozenSet[str]:
        """`key` and every name or attribute computed from it in `scope`
        (nested functions included), transitively."""
        cached = self._derived.get((scope, key))
        if cached is not None:
            return cached
        bindings = [(keys, sources) for keys, sources, _ in self._bindings_in(scope)]
        found = {key}
        changed = True
        while changed:
            changed = False
            for keys, sources in bindings:
                if all(k in found for k in keys):
                    continue
                if any(self.keys_read(source) & found for source in sources):
                    found.update(keys)
                    changed = True
        result = self._derived[(scope, key)] = frozenset(found)
        return result

    def is_backpropagated(self, key: str, scope: cst.CSTNode) -> bool:
        """Whether backward (or `torch.autograd.grad`) runs on `key` or on
        anything computed from it, anywhere in `scope`."""
        keys = self.derived(key, scope)
        return any(self.keys_read(call) & keys for call in self.gradient_calls(scope))

    def escapes(self, key: str, scope: cst.CSTNode) -> bool:
        """Whether `key`, or anything computed from it, outlives `scope` or
        is handed to other code: returned, yielded, stored on an object,
        passed to a call that does more than print or measure it."""
        keys = self.derived(key, scope)
        if any("." in k for k in keys):
            return True  # `self.losses`: kept on an object
        index = self.index
        for kind in (cst.Return, cst.Yield):
            for node in index.descendants(scope, kind):
                if node.value is not None and self.keys_read(node.value) & keys:
                    return True
        for call in index.descendants(scope, cst.Call):
            if _callee_name(call) in INSPECTING_BUILTINS:
                continue
            if any(self.keys_read(arg.value) & keys for arg in call.args):
                return True
        return False

    def used_as_tensor(self, key: str, scope: cst.CSTNode) -> bool:
        """Whether code calls tensor methods on `key` or a value computed from
        it (`running_loss.item()`, `avg.cpu()`): turning it into a float breaks that."""
        keys = self.derived(key, scope)
        for attribute in self.index.descendants(scope, cst.Attribute):
            if isinstance(attribute.value, cst.Name) and attribute.value.value in keys:
                return True
        return False

    # Autograd -------------------------------------------------------------

    def carries_graph(self, expr: cst.BaseExpression, kinds: Holds = Holds.ACTIVATION | Holds.LOSS) -> bool:
        """Whether `expr` holds one of `kinds` (a tensor that requires grad)
        and nothing on its way strips the graph."""
        holds = self.facts.values.holds(expr)
        if not holds and isinstance(expr, cst.Name):
            holds = self.loop_variable_holds(expr)
            if not holds and kinds & Holds.LOSS and self._backpropagated_itself(expr):
                holds = Holds.LOSS  # in the graph, proven by use
        if not holds & kinds or holds & (Holds.DETACHED | Holds.NUMBER):
            return False
        return not self.has_no_graph(expr)

    def carries_graph_from_callers(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether `expr` holds a tensor in the graph that reaches it through
        a parameter: some call of the file, with grad on, passes a value in
        the graph (`is_valid_matrix(mat)` called with a model's output, three
        calls up). Follows names to every binding that may reach them, the
        elements appended to a list, `for` targets to what they iterate,
        `self.x` to what the class's methods append to it; only through
        operations that keep the graph. A binding that cuts it (a `.detach()`
        under an `if`) makes the answer no: the author handles the graph."""
        if depth == 0:
            self._budget = _FROM_CALLERS_BUDGET
        self._budget -= 1
        if depth > 40 or self._budget <= 0:
            return False
        again = lambda inner: self.carries_graph_from_callers(inner, depth + 1)  # noqa: E731
        values = self.facts.values
        if isinstance(expr, (cst.List, cst.Tuple)):
            return any(again(e.value) for e in expr.elements)
        if isinstance(expr, cst.Dict):
            return any(again(e.value) for e in expr.elements if isinstance(e, cst.DictElement))
        if isinstance(expr, cst.IfExp):
            return again(expr.body) or again(expr.orelse)
        if self._cuts(expr):
            return False
        if values.holds(expr) & GRAD:
            return not self.has_no_graph(expr)
        if isinstance(expr, cst.Name):
            return self._backpropagated_itself(expr) or self._name_from_callers(expr, depth)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in NO_GRAPH_ATTRIBUTES or expr.attr.value in ("data", "grad"):
                return False
            if expr.attr.value in ("weight", "bias") and values.holds(expr.value) & Holds.MODEL:
                return True  # `self.embedding.weight`: a layer's parameter
            key = dotted(expr)
            if key is not None and self.index.is_receiver(expr.value) and key.count(".") == 1:
                return any(again(v) for v in self._appended_to_state(expr, key))
            return again(expr.value)
        if isinstance(expr, cst.Subscript):
            return again(expr.value)
        if isinstance(expr, cst.BinaryOperation):
            return again(expr.left) or again(expr.right)
        if isinstance(expr, cst.Call):
            if self._cuts(expr):
                return False
            qualified = self.facts.names.qualified(expr.func)
            if qualified is not None:
                if not qualified.startswith("torch."):
                    return self.facts.graph_returned_elsewhere(expr)  # `from engine import train_step`
                return any(again(a.value) for a in expr.args if a.keyword is None)
            if values.frozen_model(expr.func):
                return any(again(a.value) for a in expr.args)  # its own parameters add no graph
            if self._returned_from_callers(expr, None, depth):
                return True
            if isinstance(expr.func, cst.Attribute) and _callee_name(expr) not in _LEAVING_GRAPH:
                return again(expr.func.value)
        return False

    def _callees(self, call: cst.Call) -> List[cst.FunctionDef]:
        """The function of this file `call` runs: a function or method, the
        `forward` of a module built from a class of the file, a method found
        by its name, or what `self.x` was bound to (`self.loss_fn = YOLOLoss()`
        runs its `__call__`; `self.vec2box = vec2box` the function)."""
        cached = self._callee_cache.get(call)
        if cached is None:
            cached = self._callee_cache[call] = self._find_callees(call)
        return cached

    def _find_callees(self, call: cst.Call) -> List[cst.FunctionDef]:
        values = self.facts.values
        found = values.file_functions(call)
        if found:
            return found
        forward = values.forward_called(call)
        if forward is not None:
            return [forward]
        method = self.method_called(call)
        if method is not None:
            return [method]
        func = call.func
        if isinstance(func, cst.Attribute) and self.index.is_receiver(func.value):
            klass = self.index.enclosing(call, cst.ClassDef)
            for owner in self.facts.intent.class_chain(klass):
                for assign in self.index.descendants(owner, cst.Assign):
                    if not any(_stores_on_receiver(t.target, func.attr.value, self.index) for t in assign.targets):
                        continue
                    value = assign.value
                    made_by = dotted(value.func) if isinstance(value, cst.Call) else dotted(value)
                    for function in self.index.nodes(cst.FunctionDef):
                        parent = self.index.parent(self.index.parent(function))
                        if isinstance(value, cst.Call) and isinstance(parent, cst.ClassDef) and parent.name.value == made_by:
                            if function.name.value in ("__call__", "forward"):
                                return [function]
                        elif isinstance(value, cst.Name) and function.name.value == made_by and not isinstance(parent, cst.ClassDef):
                            return [function]
        return []

    def _returned_from_callers(self, call: cst.Call, position: Optional[int], depth: int) -> bool:
        """Whether what the file's function `call` runs returns (at
        `position` of a returned tuple) a value in the graph, its parameters
        bound to this call's arguments."""
        # A template method's own stub runs nothing: its overrides do, here or elsewhere.
        callees = [f for f in self._callees(call) if not is_abstract(f)]
        if not callees:
            return self.facts.graph_returned_elsewhere(call, position)
        if depth > 40:
            return False
        # Several for a template method: each subclass's override may run.
        return any(self._returns_graph(function, call, position, depth) for function in callees)

    def _returns_graph(self, function: cst.FunctionDef, call: cst.Call, position: Optional[int], depth: int) -> bool:
        params = [p for p in function.params.params]
        if params and params[0].name.value == self.index.instance_param(function) and isinstance(call.func, cst.Attribute):
            params = params[1:]
        bound: Dict[cst.Param, cst.BaseExpression] = {}
        position_of_arg = 0
        for arg in call.args:
            if arg.star:
                break
            if arg.keyword is None:
                if position_of_arg < len(params):
                    bound[params[position_of_arg]] = arg.value
                position_of_arg += 1
            else:
                match = next((p for p in params if p.name.value == arg.keyword.value), None)
                if match is not None:
                    bound[match] = arg.value
        saved = dict(self._bound)
        self._bound.update(bound)
        try:
            intent = self.facts.intent
            for returned in self.index.descendants(function.body, cst.Return):
                if self.index.scope_of(returned) is not function or returned.value is None:
                    continue
                if intent.dead_for_call(returned, function, call):
                    continue  # `if detach: return loss.detach()` for `f(..., detach=False)`
                value = intent.branch_for_call(returned.value, function, call)
                if position is not None and isinstance(value, cst.Tuple):
                    if position >= len(value.elements):
                        continue
                    value = value.elements[position].value
                if self.carries_graph_from_callers(value, depth + 1):
                    return True
        finally:
            self._bound = saved
        return False

    def _name_from_callers(self, name: cst.Name, depth: int) -> bool:
        values, index = self.facts.values, self.index
        scope = values.scope(name)
        reaching = scope.reaching(name)
        for binding, value in reaching:
            if value is not None and (self._cuts(value) or self.facts.grad_mode.is_disabled(binding)):
                return False  # cut on one path: handled by the author
        found = False
        for binding, value in reaching:
            position = unpacked_position(binding, name.value, from_one_value=True)
            if isinstance(value, cst.Call) and position is not None:
                found = found or self._returned_from_callers(value, position, depth + 1)
            elif value is not None and self.carries_graph_from_callers(value, depth + 1):
                found = True
        # Elements appended to it before the read.
        for read in scope.reads.get(name.value, ()):
            parent = index.parent(read)
            call = index.parent(parent) if isinstance(parent, cst.Attribute) and parent.value is read else None
            if isinstance(call, cst.Call) and _callee_name(call) in STORING_METHODS and index.before(call, name):
                if any(self.carries_graph_from_callers(a.value, depth + 1) for a in call.args):
                    found = True
        if found:
            return True
        # Bound by an enclosing `for`: what it iterates.
        for loop in self.enclosing_loops(name):
            if isinstance(loop, cst.For) and name.value in set(_target_keys(loop.target)):
                iterable = loop.iter
                while isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value in ("enumerate", "reversed", "list", "zip") and iterable.args:
                    iterable = iterable.args[0].value
                return self.carries_graph_from_callers(iterable, depth + 1)
        # The parameter itself reaches the read: what the file's calls pass.
        if reaching:
            last = reaching[-1][0]
            branch = next((a for a in index.ancestors(last) if isinstance(a, (cst.If, cst.Else, cst.For, cst.While, cst.Try))), None)
            if branch is None or index.is_inside(name, branch):
                return False
        function = index.scope_of(name)
        if not isinstance(function, cst.FunctionDef):
            return False
        param = next((p for p in _function_params(function) if p.name.value == name.value), None)
        if param is None:
            return False
        if param in self._bound:  # evaluated for one call: what it passes
            return self.carries_graph_from_callers(self._bound[param], depth + 1)
        for call_arg in values.arguments_for(param):
            call = index.enclosing(call_arg, cst.Call)
            if call is not None and self.facts.grad_mode.is_disabled(call):
                continue
            if self.carries_graph_from_callers(call_arg, depth + 1):
                return True
        return False

    def _cuts(self, expr: cst.BaseExpression) -> bool:
        """`x.detach()`, `x.item()`, `x.argmax()`, `x > 0`, a number: a value
        that says it holds no graph, whatever its input held."""
        if isinstance(expr, (cst.Comparison, cst.BooleanOperation, cst.Integer, cst.Float, cst.BaseString)):
            return True
        if self.facts.values.holds(expr) & (Holds.DETACHED | Holds.NUMBER) and not self.facts.values.holds(expr) & GRAD:
            return True
        return isinstance(expr, cst.Call) and _callee_name(expr) in NO_GRAPH_METHODS | {"detach_"}

    def _appended_to_state(self, at: cst.CSTNode, key: str) -> List[cst.BaseExpression]:
        """What the methods of the class around `at` append to `self.x`."""
        klass = self.index.enclosing(at, cst.ClassDef)
        if klass is None:
            return []
        found = []
        for call in self.index.descendants(klass, cst.Call):
            if _callee_name(call) == "append" and isinstance(call.func, cst.Attribute) and dotted(call.func.value) == key and call.args:
                found.append(call.args[0].value)
        return found

    def _backpropagated_itself(self, name: cst.Name) -> bool:
        """`loss.backward()` on the very binding `name` reads."""
        values = self.facts.values
        scope = values.scope(name)
        binding = scope.assignment_before(name.value, name)
        if binding is None:
            return False
        for read in scope.reads.get(name.value, ()):
            parent = self.facts.index.parent(read)
            # `loss["total"].backward()`: a dict or list of losses, one of them backpropagated.
            child = read
            while isinstance(parent, cst.Subscript) and parent.value is child:
                child, parent = parent, self.facts.index.parent(parent)
            call = self.facts.index.parent(parent)
            if (
                isinstance(parent, cst.Attribute)
                and parent.attr.value == "backward"
                # `accelerator.backward(loss)` backpropagates its argument, not itself.
                and not (isinstance(call, cst.Call) and any(a.keyword is None for a in call.args))
                and scope.assignment_before(name.value, read) == binding
            ):
                return True
        return False

    def loop_variable_holds(self, name: cst.Name) -> Holds:
        """PARAM for `p` in `for p in model.parameters():` and
        `for n, p in model.named_parameters():`, read inside that loop.

        `values` resolves a name from assignments that do not contain the
        read, so a `for` target is unknown inside its own body.
        """
        for loop in self.enclosing_loops(name):
            if not isinstance(loop, cst.For) or not isinstance(loop.iter, cst.Call):
                continue
            method = _callee_name(loop.iter)
            target = loop.target
            if method == "named_parameters" and isinstance(target, (cst.Tuple, cst.List)) and target.elements:
                target = target.elements[-1].value
            elif method != "parameters":
                target = None
            if isinstance(target, cst.Name) and target.value == name.value:
                return Holds.PARAM
            if name.value in set(_target_keys(loop.target)):
                return Holds.NOTHING  # bound by this loop to something else
        return Holds.NOTHING

    def has_no_graph(self, expr: cst.CSTNode, depth: int = 0) -> bool:
        """True only when `expr` certainly holds no graph: comparisons,
        integer results (`argmax`, `eq`, `.long()`), numbers, `.item()`."""
        if depth > 8:
            return False
        if isinstance(expr, (cst.Comparison, cst.BooleanOperation, cst.Integer, cst.Float, cst.BaseString)):
            return True
        if isinstance(expr, cst.UnaryOperation):
            return isinstance(expr.operator, cst.Not) or self.has_no_graph(expr.expression, depth + 1)
        if isinstance(expr, (cst.List, cst.Tuple)):
            # `[n, out.size(1)]`: a shape.
            return all(
                self.has_no_graph(e.value, depth + 1) or not self.facts.values.holds(e.value) & GRAD
                for e in expr.elements
            )
        if isinstance(expr, cst.IfExp):
            return self.has_no_graph(expr.body, depth + 1) and self.has_no_graph(expr.orelse, depth + 1)
        if isinstance(expr, cst.BinaryOperation):
            # `argmax + offset`: a side that holds nothing differentiable adds no graph.
            return all(
                self.has_no_graph(side, depth + 1) or not self.facts.values.holds(side) & GRAD
                for side in (expr.left, expr.right)
            )
        if isinstance(expr, cst.Subscript):
            # `out["boxes"]` of a module of this file: what its forward stores there.
            entries = self.facts.values.output_entries(expr)
            if entries is not None:
                return all(self.has_no_graph(e, depth + 1) or not self.facts.values.holds(e) & GRAD for e in entries)
            return self.has_no_graph(expr.value, depth + 1)
        if isinstance(expr, cst.Attribute):
            return expr.attr.value in NO_GRAPH_ATTRIBUTES
        if isinstance(expr, cst.Name):
            return self._name_has_no_graph(expr, depth)
        if isinstance(expr, cst.Call):
            return self._call_has_no_graph(expr, depth)
        return False

    def _name_has_no_graph(self, name: cst.Name, depth: int) -> bool:
        entry = self.facts.values.scope(name).assignment_before(name.value, name)
        if entry is None:
            return False
        _, node, value, _ = entry
        if value is None:
            return False
        if isinstance(node, cst.AugAssign):
            # `correct += pred.eq(y).sum()`: both the old and the added value.
            target = node.target
            return self.has_no_graph(value, depth + 1) and isinstance(target, cst.Name) and self._name_has_no_graph(target, depth + 1)
        return self.has_no_graph(value, depth + 1)

    def _call_has_no_graph(self, call: cst.Call, depth: int) -> bool:
        qualified = self.facts.names.qualified(call.func)
        name = _callee_name(call)
        if qualified is not None:
            if any(arg.keyword is not None and arg.keyword.value == "requires_grad" for arg in call.args):
                return False
            if qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in NO_GRAPH_METHODS:
                return True
            return bool(call.args) and not any(self._may_carry(arg.value, depth) for arg in call.args)
        if self._module_without_parameters(call.func):
            # `pad = nn.ZeroPad2d(...)`, `self.pool(x)`: output needs grad only through the inputs.
            return not any(self._may_carry(arg.value, depth) for arg in call.args)
        if isinstance(call.func, cst.Name):
            return name in NO_GRAPH_BUILTINS
        if isinstance(call.func, cst.Attribute):
            if name in NO_GRAPH_METHODS:
                return True
            if name == "requires_grad_":
                return False
            if self.facts.values.holds(call.func) & Holds.MODEL:
                return False  # a submodule's forward
            receiver = call.func.value
            return self.has_no_graph(receiver, depth + 1) and not any(self._may_carry(arg.value, depth) for arg in call.args)
        return False

    def _module_without_parameters(self, func: cst.BaseExpression) -> bool:
        modules = self.facts.modules
        if isinstance(func, cst.Attribute) and self.index.is_receiver(func.value):
            owner = modules.class_of(func)
            member = owner.members.get(func.attr.value) if owner is not None else None
            return member is not None and member.kind == "module" and not member.trainable
        if isinstance(func, cst.Name):
            entry = self.facts.values.scope(func).assignment_before(func.value, func)
            value = entry[2] if entry is not None else None
            if isinstance(value, cst.Call) and modules.is_module_constructor(value):
                return not modules._builds_parameters(value)
        return False

    def _may_carry(self, expr: cst.BaseExpression, depth: int) -> bool:
        return bool(self.facts.values.holds(expr) & GRAD) and not self.has_no_graph(expr, depth + 1)

    # Backward, steps, zeroing --------------------------------------------

    def gradient_calls(self, node: cst.CSTNode) -> List[cst.Call]:
        """`x.backward()`, `accelerator.backward(x)`, `manual_backward`,
        `torch.autograd.backward/grad` inside `node`."""
        return [call for call in self.index.descendants(node, cst.Call) if self.is_gradient_call(call)]

    def is_gradient_call(self, call: cst.Call) -> bool:
        """Whether `call` is one of those `gradient_calls` collects."""
        return (
            isinstance(call.func, cst.Attribute) and _callee_name(call) in BACKWARD_METHODS
        ) or self.facts.names.qualified(call.func) in GRADIENT_FUNCTIONS

    def backward_calls(self, node: cst.CSTNode) -> List[cst.Call]:
        """Calls that add into `.grad`: backward, not `torch.autograd.grad`."""
        return [c for c in self.gradient_calls(node) if self.facts.names.qualified(c.func) != "torch.autograd.grad"]

    def optimizer_steps(self, node: cst.CSTNode) -> List[cst.Call]:
        """The optimizer steps inside `node`."""
        return [call for call in self.index.descendants(node, cst.Call) if self.is_optimizer_step(call)]

    def is_optimizer_step(self, call: cst.Call) -> bool:
        """`optimizer.step()`, `scaler.step(optimizer)`, `xm.optimizer_step(optimizer)`."""
        name = _callee_name(call)
        if name not in OPTIMIZER_STEPS or not isinstance(call.func, cst.Attribute):
            return False
        if name == "step" and self._optimizer(call.func.value):
            return True
        return bool(call.args) and self._optimizer(call.args[0].value)

    def _optimizer(self, expr: cst.BaseExpression) -> bool:
        """An optimizer by what `expr` holds, or, for a parameter, by what the file's callers pass."""
        values = self.facts.values
        if values.holds(expr) & Holds.OPTIMIZER:
            return True
        return isinstance(expr, cst.Name) and bool(values.passed_object(expr) & Holds.OPTIMIZER)

    def zeroes_gradients(self, node: cst.CSTNode) -> bool:
        """Whether anything inside `node` clears gradients: `zero_grad()` on
        anything, `p.grad = None`, `p.grad.zero_()`, `del p.grad`, or a call
        of a function of this file that does."""
        return self._clears_grads_directly(node) or self._calls_zeroing_function(node)

    def zeroes_gradients_for(self, step: cst.CSTNode, node: cst.CSTNode, skip: Optional[cst.CSTNode] = None) -> bool:
        """Whether something inside `node` (outside `skip`) clears gradients
        on a path that can run with `step`: a zeroing in the `else` of the
        `if` whose body holds `step` (or the other way round) never runs
        with it (`if bf16: ...; opt.step()` / `else: opt.zero_grad(); ...`)."""
        index = self.index
        for site in self._zeroing_sites(node):
            if skip is not None and (site is skip or index.is_inside(site, skip)):
                continue
            if not self._exclusive(site, step):
                return True
        return False

    def _exclusive(self, a: cst.CSTNode, b: cst.CSTNode) -> bool:
        """Whether `a` and `b` sit in different arms of one `if`."""
        index = self.index
        for ancestor in index.ancestors(a):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                return False
            if isinstance(ancestor, cst.If) and ancestor.orelse is not None and index.is_inside(b, ancestor):
                in_body_a, in_body_b = index.is_inside(a, ancestor.body), index.is_inside(b, ancestor.body)
                in_else_a, in_else_b = index.is_inside(a, ancestor.orelse), index.is_inside(b, ancestor.orelse)
                return (in_body_a and in_else_b) or (in_else_a and in_body_b)
        return False

    def _zeroing_sites(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        yield from self._direct_zeroing_sites(node)
        functions = self._zeroing_function_names()
        if functions:
            for name in self.index.descendants(node, cst.Name):
                if name.value in functions:
                    yield name

    def _clears_grads_directly(self, node: cst.CSTNode) -> bool:
        return next(self._direct_zeroing_sites(node), None) is not None

    def _direct_zeroing_sites(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        index = self.index
        for name in index.descendants(node, cst.Name):
            if ZEROING_NAME.search(name.value):
                yield name
        for attribute in index.descendants(node, cst.Attribute):
            if attribute.attr.value == "grad":
                parent = index.parent(attribute)
                if isinstance(parent, (cst.AssignTarget, cst.Del)):
                    yield attribute  # `p.grad = None`, `del p.grad`
                    continue
                if isinstance(parent, cst.AugAssign) and parent.target is attribute:
                    yield attribute  # `p.grad *= 0`
                    continue
                # `p.grad.zero_()`, `p.grad.data.zero_()`
                while isinstance(parent, cst.Attribute) and parent.attr.value == "data":
                    parent = index.parent(parent)
                if isinstance(parent, cst.Attribute) and parent.attr.value in GRAD_CLEARING_METHODS:
                    yield attribute

    def _calls_zeroing_function(self, node: cst.CSTNode) -> bool:
        functions = self._zeroing_function_names()
        if not functions:
            return False
        for name in self.index.descendants(node, cst.Name):
            if name.value in functions:
                return True
        return False

    def calls_in_loops(self, function: cst.FunctionDef) -> List[Tuple[cst.Call, Loop]]:
        """Calls of `function` (resolved as `intent.helpers_called` does) made
        inside a loop of the file, each with its innermost loop."""
        if self._loop_calls is None:
            self._loop_calls = {}
            helpers = self.facts.intent.helpers_called
            for call in self.index.nodes(cst.Call):
                loops = self.enclosing_loops(call)
                if not loops:
                    continue
                for callee in helpers(call):
                    self._loop_calls.setdefault(callee, []).append((call, loops[0]))
        return self._loop_calls.get(function, [])

    def _zeroing_function_names(self) -> Set[str]:
        """Functions and methods of this file that clear gradients, directly or through each other."""
        if self._zeroing_functions is None:
            defs = self.index.nodes(cst.FunctionDef)
            found = {d.name.value for d in defs if self._clears_grads_directly(d.body)}
            changed = True
            while changed:
                changed = False
                for d in defs:
                    if d.name.value in found:
                        continue
                    if any(n.value in found for n in self.index.descendants(d.body, cst.Name)):
                        found.add(d.name.value)
                        changed = True
            self._zeroing_functions = found
        return self._zeroing_functions


def _stores_on_receiver(target: cst.BaseExpression, attribute: str, index) -> bool:
    """`self.<attribute> = ...`, whatever the method calls its instance."""
    return isinstance(target, cst.Attribute) and target.attr.value == attribute and index.is_receiver(target.value)
