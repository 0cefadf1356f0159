"""Which model a call runs forward on, and the loops that run one.

`model(x)`, `model.forward(x)`, `self.models["generator"](z)` and
`self.net(x)` (when the class switches `self.net` to eval or train mode)
run a model; a model whose own constructor froze it records no graph.
An evaluating helper is a function whose loop runs a model it is handed,
that asks for no gradient and sets no grad mode: `run_epoch(model, loader)`
called after `model.eval()` evaluates with autograd on. Its file's
`Summary` tells the files that call it (`analysis/project.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Iterator, Optional, Tuple, Union

import libcst as cst

from detachlint.analysis.intent import is_evaluation_name
from detachlint.analysis.names import all_params, dotted
from detachlint.analysis.values import Holds

if TYPE_CHECKING:  # pragma: no cover
    from detachlint.analysis import Facts

Loop = Union[cst.For, cst.While]
_LOOPS = frozenset({cst.For, cst.While})
_DEFINITIONS = frozenset({cst.FunctionDef, cst.Lambda, cst.ClassDef})


class ModelCalls:
    def __init__(self, facts: "Facts") -> None:
        self.facts = facts
        self._first_calls: Dict[cst.CSTNode, Optional[cst.Call]] = {}

    def innermost_loop(self, node: cst.CSTNode) -> Optional[Loop]:
        """The loop whose body holds `node`, within its function."""
        # Asked for every call in every loop: type() lookups, faster than
        # isinstance() on libcst's node classes.
        index = self.facts.index
        for ancestor in index.ancestors(node):
            kind = type(ancestor)
            if kind in _DEFINITIONS:
                return None
            if kind in _LOOPS and index.is_inside(node, ancestor.body):
                return ancestor
        return None

    def model_of(self, call: cst.Call, within: Optional[cst.CSTNode] = None) -> Optional[str]:
        """The model a call runs forward on: `model(x)`, `model.forward(x)`,
        `self.model["generator"](x)` (a dict of models), `self.net(x)` when
        the class switches `self.net` to eval or train mode somewhere."""
        facts = self.facts
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "forward":
            func = func.value
        if isinstance(func, cst.Subscript) and len(func.slice) == 1 and isinstance(func.slice[0].slice, cst.Index):
            key = func.slice[0].slice.value
            container = dotted(func.value)
            if isinstance(key, cst.SimpleString) and container and facts.values.holds(func.value) & Holds.MODEL:
                return f"{container}[{key.value}]"
            return None
        name = dotted(func)
        if name is None or facts.names.qualified(func) is not None:
            return None
        if facts.intent.helpers_called(call):
            return None  # a function or method of this file, not a model
        if facts.values.holds(func) & Holds.MODEL:
            return name
        # Whatever was switched to eval mode with `.eval()` is a module.
        scope = facts.index.scope_of(call)
        if facts.intent.eval_switch_before(name, call, scope, submodules=False):
            return name
        receiver = facts.index.receiver(call)
        if within is not None and receiver and name.startswith(receiver + ".") and name in facts.intent.switched_in_class(call):
            return name
        return None

    def records_graph(self, call: cst.Call) -> bool:
        """A model frozen for life by its own constructor records none."""
        func = call.func.value if isinstance(call.func, cst.Attribute) and call.func.attr.value == "forward" else call.func
        return not self.facts.values.frozen_model(func)

    def first_in_loop(self, loop: Loop) -> Optional[cst.Call]:
        """The first call in the loop's own body that runs a model recording
        a graph with autograd on; asked for every call in the loop, so kept
        per loop."""
        if loop not in self._first_calls:
            self._first_calls[loop] = next(
                (
                    call
                    for call in self.facts.index.descendants(loop.body, cst.Call)
                    # Grad mode before the model's name, which may evaluate the file's values.
                    if self.innermost_loop(call) is loop
                    and not self.facts.grad_mode.is_disabled(call)
                    and self.model_of(call) is not None
                    and self.records_graph(call)
                ),
                None,
            )
        return self._first_calls[loop]

    def helper_loops(self, helper: cst.FunctionDef) -> Iterator[Tuple[Loop, str]]:
        """(loop, model) for each model call with autograd on in a loop of
        `helper`'s own code that evaluates only if its caller switched the
        model to eval mode: `helper` sets no grad mode, is not named for
        evaluation, switches no model itself and is no test (those loops are
        judged on their own). `model` is named as `helper` names it."""
        facts = self.facts
        intent = facts.intent
        if facts.grad_mode.mode_at(helper.body) is not None or is_evaluation_name(helper.name.value):
            return
        if intent.switches_to_eval(helper) or intent.is_test_code(helper):
            return
        for kind in (cst.For, cst.While):
            for loop in facts.index.descendants(helper.body, kind):
                if facts.index.scope_of(loop) is not helper:
                    continue
                for inner in facts.index.descendants(loop.body, cst.Call):
                    if self.innermost_loop(inner) is not loop or facts.grad_mode.is_disabled(inner):
                        continue
                    name = self.model_of(inner)
                    if name is not None and not intent.eval_for_life(name, inner):
                        yield loop, name

    def evaluating_parameter(self, helper: cst.FunctionDef) -> Optional[Tuple[Loop, str, int]]:
        """(loop, parameter, position) when `helper` asks for no gradient at
        all and a loop of it runs the model passed as `parameter` (`model` in
        `def run_epoch(model, loader)`): called after `model.eval()`, it
        evaluates with autograd on. `position` counts the parameters a call
        passes positionally (`self` left out), -1 for a keyword-only one."""
        index = self.facts.index
        if not any(index.scope_of(loop) is helper for kind in (cst.For, cst.While) for loop in index.descendants(helper.body, kind)):
            return None  # most functions: no loop of their own
        names = {p.name.value for p in all_params(helper.params)} - {index.instance_param(helper)}
        if not any(_called_name(call) in names for call in index.descendants(helper.body, cst.Call)):
            return None  # no parameter is ever called
        for loop, model in self.helper_loops(helper):
            if model in names:
                if self.facts.intent.gradient_requests(helper):
                    return None
                positional = [p.name.value for p in self.facts.intent.positional_params(helper)]
                return loop, model, positional.index(model) if model in positional else -1
        return None


def _called_name(call: cst.Call) -> Optional[str]:
    """`model` for `model(x)` and `model.forward(x)`."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "forward":
        func = func.value
    return func.value if isinstance(func, cst.Name) else None
