"""What a `torch.autograd.Variable(...)` call does since torch 0.4.

`Variable(t)` returns `t.detach()`; `volatile=` is ignored. Whether that
changes what the program computes depends on the value it wraps and on the
grad mode the call runs in: DL701 reports the calls that do (a cut of a
graph, a `volatile` flag relied on while autograd is on), DL702 the plain
deprecations. Both ask this module, so they never disagree on a call.
"""

from __future__ import annotations

import enum
from typing import Optional

import libcst as cst

from detachlint.analysis.loss_terms import LossTerms
from detachlint.analysis.values import GRAD
from detachlint.analysis.vocabulary import VARIABLE_CLASSES


class Effect(enum.Enum):
    VOLATILE = "volatile=True, autograd on"
    VOLATILE_FLAG = "volatile=<flag>, autograd on"
    VOLATILE_UNDER_NO_GRAD = "volatile with autograd already off"
    VOLATILE_UNREAD = "volatile on a value no trained model reads (a label, a constant)"
    CUTS = "wraps a value that carries a graph"
    FORWARDED = "passes its arguments on (*args)"
    NEW_LEAF = "requires_grad=True: a new leaf"
    NO_GRAPH = "wraps data: does nothing"
    UNKNOWN = "wraps a value not known here"


# What changes what the program computes: DL701's; the rest are DL702's.
CHANGES_COMPUTATION = frozenset({Effect.VOLATILE, Effect.VOLATILE_FLAG, Effect.CUTS})


def keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    return next((arg for arg in call.args if arg.keyword is not None and arg.keyword.value == name), None)


def is_true(arg: Optional[cst.Arg]) -> bool:
    return arg is not None and isinstance(arg.value, cst.Name) and arg.value.value == "True"


def is_false(arg: Optional[cst.Arg]) -> bool:
    return arg is not None and isinstance(arg.value, cst.Name) and arg.value.value == "False"


def variable_effect(facts, node: cst.Call) -> Optional[Effect]:
    """The effect of `node` if it calls torch's `Variable`; None otherwise."""
    if facts.names.qualified(node.func) not in VARIABLE_CLASSES or not node.args:
        return None
    volatile = keyword(node, "volatile")
    if volatile is not None and not is_false(volatile):
        if facts.interpreter.grad_modes(node) == {False}:
            return Effect.VOLATILE_UNDER_NO_GRAD
        if not feeds_a_model(facts, node):
            return Effect.VOLATILE_UNREAD
        return Effect.VOLATILE if is_true(volatile) else Effect.VOLATILE_FLAG
    data = node.args[0]
    if data.star:
        return Effect.FORWARDED
    if is_true(keyword(node, "requires_grad")):
        return Effect.NEW_LEAF
    if carries_graph(facts, data.value):
        return Effect.CUTS
    if carries_no_graph(facts, data.value):
        return Effect.NO_GRAPH
    return Effect.UNKNOWN


def carries_graph(facts, tensor: cst.BaseExpression) -> bool:
    """Seen to hold a tensor with a live graph where the call runs."""
    if facts.interpreter.holds_no_graph(tensor):
        return False
    return bool(facts.values.holds(tensor) & GRAD) or facts.interpreter.in_graph(tensor)


def carries_no_graph(facts, tensor: cst.BaseExpression) -> bool:
    """Seen to hold data (a batch, a fresh tensor, a detached value)."""
    if carries_graph(facts, tensor):
        return False
    return facts.shared("loss_terms", LossTerms).is_plain(tensor) or facts.values.computed_without_graph(tensor)


def feeds_a_model(facts, node: cst.Call) -> bool:
    """Whether the value `node` makes reaches, in its function, an argument
    of a call of a module with parameters that require grad, or of code the
    file cannot follow, as the call's only input with a graph: there
    `volatile=True` used to stop the graph. A label wrapped so meets the
    model's output in a loss or a metric, whose graph is built either way."""
    scope = facts.values.scope(node)
    carriers = scope.flows_from(node)
    index = facts.index
    function = index.scope_of(node)
    root = function if function is not None else index.module
    for leaving in [*index.descendants(root, cst.Return), *index.descendants(root, cst.Yield)]:
        if leaving.value is not None and _carries(leaving.value, node, carriers, scope, index):
            return True  # handed back to callers, who may feed it to a model
    for call in index.descendants(function, cst.Call) if function is not None else index.nodes(cst.Call):
        if call is node or not index.before(node, call) and not index.is_inside(node, call):
            continue
        carrying = [arg for arg in call.args if _carries(arg.value, node, carriers, scope, index)]
        if not carrying:
            continue
        if any(_may_carry_graph(facts, arg.value) for arg in call.args if arg not in carrying):
            continue  # `criterion(output, label)`: the graph comes from the other argument either way
        if facts.interpreter.modules_held(call.func):
            return True
        if isinstance(call.func, cst.Attribute) and facts.interpreter.modules_held(call.func.value):
            return True  # `model.forward(x)`, `encoder.encode(x)`: a method of the model
        value = facts.interpreter.value_of(call.func)
        if value is None or value.opaque and facts.names.qualified(call.func) is None:
            return True  # handed to code the file cannot see
    return False


def _carries(expr: cst.BaseExpression, seed: cst.Call, carriers, scope, index) -> bool:
    """`expr` holds the call's value, or reads a name bound from it (even through `.data`)."""
    if expr is seed or index.is_inside(seed, expr):
        return True
    reads = [expr] if isinstance(expr, cst.Name) else [n for n in index.descendants(expr, cst.Name)]
    return any(binding in carriers for read in reads if isinstance(read, cst.Name) for binding, _ in scope.reaching(read))


def _may_carry_graph(facts, expr: cst.BaseExpression) -> bool:
    value = facts.interpreter.value_of(expr)
    return value is not None and bool(value.origins or value.made_by)
