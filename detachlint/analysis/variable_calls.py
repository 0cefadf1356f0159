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
