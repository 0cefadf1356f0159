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

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, FrozenSet, Iterator, List, Optional, Set, Tuple, Union

import libcst as cst

from detachlint.analysis.names import dotted
from detachlint.analysis.values import GRAD, NO_GRAPH_ATTRIBUTES, NO_GRAPH_BUILTINS, NO_GRAPH_METHODS, Holds, is_variable_read

if TYPE_CHECKING:  # pragma: no cover
    from detachlint.analysis import Facts

Loop = Union[cst.For, cst.While]

# Calls that look at a value without keeping it.
_INSPECTING_CALLS = {"print", "len", "float", "int", "str", "repr", "format", "round", "isinstance", "type"}
# What a data-loading loop iterates over.
_DATA_ITERABLE = re.compile(r"loader|dataset|data_?iter|epoch_iterator", re.I)
# Helpers that clear gradients: `zero_grad`, `zero_gradients`, `clear_grad`,
# `reset_grads`, `_foreach_zero_` over grads, `set_grads_to_none`.
_ZEROING_NAME = re.compile(r"(zero|clear|reset)\w*grad|grads?_?(to_)?none|grad\w*(zero|clear|reset)", re.I)
# In-place edits that clear a `.grad` tensor.
_GRAD_CLEARING_METHODS = {"zero_", "fill_", "mul_", "detach_", "copy_", "requires_grad_"}
_BACKWARD_METHODS = {"backward", "manual_backward"}
_GRADIENT_FUNCTIONS = {"torch.autograd.backward", "torch.autograd.grad"}


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
        return isinstance(name, cst.Name) and bool(_DATA_ITERABLE.search(name.value))

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
            return None
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "append":
            if len(node.args) == 1 and node.args[0].keyword is None and node.args[0].star == "":
                if isinstance(self.index.parent(node), cst.Expr):
                    return node.func.value, node.args[0].value, "append"
        return None

    def _reset_before(self, key: str, node: cst.CSTNode, loop: Loop) -> bool:
        """Whether the loop's body binds `key` afresh before `node`
        (`total = 0`, `losses = []`, `losses.clear()`, `for total in ...`)."""
        index = self.index
        order = index.order[node]
        for keys, sources, binder in self._bindings_in(loop):
            if key not in keys or index.order[binder] >= order or index.is_inside(node, binder):
                continue
            if isinstance(binder, (cst.AugAssign, cst.Call)):
                continue  # adds to the old value
            if not any(key in self.keys_read(source) for source in sources):
                return True
        for call in index.descendants(loop.body, cst.Call):
            if index.order[call] >= order:
                break
            if isinstance(call.func, cst.Attribute) and call.func.attr.value == "clear" and _key(call.func.value) == key:
                return True
        return False

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
            if isinstance(node.func, cst.Attribute) and node.func.attr.value in ("append", "extend", "insert", "update", "add"):
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
            if _callee_name(call) in _INSPECTING_CALLS:
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

    def _backpropagated_itself(self, name: cst.Name) -> bool:
        """`loss.backward()` on the very binding `name` reads."""
        values = self.facts.values
        scope = values.scope(name)
        binding = scope.assignment_before(name.value, name)
        if binding is None:
            return False
        for read in scope.reads.get(name.value, ()):
            parent = self.facts.index.parent(read)
            if (
                isinstance(parent, cst.Attribute)
                and parent.attr.value == "backward"
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
        if isinstance(expr, cst.BinaryOperation):
            # `argmax + offset`: a side that holds nothing differentiable adds no graph.
            return all(
                self.has_no_graph(side, depth + 1) or not self.facts.values.holds(side) & GRAD
                for side in (expr.left, expr.right)
            )
        if isinstance(expr, cst.Subscript):
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
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
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
        return [
            call
            for call in self.index.descendants(node, cst.Call)
            if (isinstance(call.func, cst.Attribute) and _callee_name(call) in _BACKWARD_METHODS)
            or self.facts.names.qualified(call.func) in _GRADIENT_FUNCTIONS
        ]

    def backward_calls(self, node: cst.CSTNode) -> List[cst.Call]:
        """Calls that add into `.grad`: backward, not `torch.autograd.grad`."""
        return [c for c in self.gradient_calls(node) if self.facts.names.qualified(c.func) != "torch.autograd.grad"]

    def optimizer_steps(self, node: cst.CSTNode) -> List[cst.Call]:
        """The optimizer steps inside `node`."""
        return [call for call in self.index.descendants(node, cst.Call) if self.is_optimizer_step(call)]

    def is_optimizer_step(self, call: cst.Call) -> bool:
        """`optimizer.step()`, `scaler.step(optimizer)`, `xm.optimizer_step(optimizer)`."""
        name = _callee_name(call)
        if name not in ("step", "optimizer_step") or not isinstance(call.func, cst.Attribute):
            return False
        values = self.facts.values
        if name == "step" and values.holds(call.func.value) & Holds.OPTIMIZER:
            return True
        return bool(call.args) and bool(values.holds(call.args[0].value) & Holds.OPTIMIZER)

    def zeroes_gradients(self, node: cst.CSTNode) -> bool:
        """Whether anything inside `node` clears gradients: `zero_grad()` on
        anything, `p.grad = None`, `p.grad.zero_()`, `del p.grad`, or a call
        of a function of this file that does."""
        return self._clears_grads_directly(node) or self._calls_zeroing_function(node)

    def _clears_grads_directly(self, node: cst.CSTNode) -> bool:
        index = self.index
        for name in index.descendants(node, cst.Name):
            if _ZEROING_NAME.search(name.value):
                return True
        for attribute in index.descendants(node, cst.Attribute):
            if attribute.attr.value == "grad":
                parent = index.parent(attribute)
                if isinstance(parent, (cst.AssignTarget, cst.Del)):
                    return True  # `p.grad = None`, `del p.grad`
                if isinstance(parent, cst.AugAssign) and parent.target is attribute:
                    return True  # `p.grad *= 0`
                # `p.grad.zero_()`, `p.grad.data.zero_()`
                while isinstance(parent, cst.Attribute) and parent.attr.value == "data":
                    parent = index.parent(parent)
                if isinstance(parent, cst.Attribute) and parent.attr.value in _GRAD_CLEARING_METHODS:
                    return True
        return False

    def _calls_zeroing_function(self, node: cst.CSTNode) -> bool:
        functions = self._zeroing_function_names()
        if not functions:
            return False
        for name in self.index.descendants(node, cst.Name):
            if name.value in functions:
                return True
        return False

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
