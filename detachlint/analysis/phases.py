"""Whether code runs on every training step or only while setting up.

Code that builds, initialises, loads, converts or moves a model runs before
(or after) training and may rearrange tensors freely. Code that runs on
every step meets autograd's graph and the optimizer's state:

- `forward` of an `nn.Module` class;
- `step` of an optimizer class (a class whose base is `...Optimizer`);
- code in a loop whose body asks for gradients (`loss.backward()`,
  `torch.autograd.grad`, `manual_backward`, `optimizer.step()`), or code
  after such a call that shares its innermost loop (or, outside loops,
  simply comes after it in the same function).

`runs_during_training` widens this to the functions of the file such code
reaches: called from a training step, from code after an optimizer was
built, or from code between a forward and a gradient computation; as a
method of a model of this file (`net.prune()`) or as a function handed to
another object (`Remover(prune_filters)`). Calls made in `__init__` do not
count: the model is still being built.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Dict, List, Optional

import libcst as cst

from detachlint.analysis.names import dotted
from detachlint.analysis.values import Holds
from detachlint.analysis.vocabulary import BACKWARD_METHODS, GRADIENT_FUNCTIONS

if TYPE_CHECKING:  # pragma: no cover
    from detachlint.analysis import Facts



class StepPhases:
    def __init__(self, facts: "Facts") -> None:
        self.facts = facts
        self._gradient_calls: Dict[cst.CSTNode, List[cst.Call]] = {}
        for call in facts.index.nodes(cst.Call):
            if self._asks_for_gradients(call):
                self._gradient_calls.setdefault(facts.index.scope_of(call), []).append(call)

    def _asks_for_gradients(self, call: cst.Call) -> bool:
        func = call.func
        if self.facts.names.qualified(func) in GRADIENT_FUNCTIONS:
            return True
        if not isinstance(func, cst.Attribute):
            return False
        if func.attr.value in BACKWARD_METHODS:
            return True
        if func.attr.value == "step":
            # `optimizer.step()`, `scaler.step(optimizer)`; not `scheduler.step()`.
            if self.facts.values.holds(func.value) & Holds.OPTIMIZER:
                return True
            return any(self.facts.values.holds(arg.value) & Holds.OPTIMIZER for arg in call.args)
        return False

    def gradient_calls(self, scope: cst.CSTNode) -> List[cst.Call]:
        """Calls in `scope`'s own code that ask for gradients or step an optimizer."""
        return self._gradient_calls.get(scope, [])

    def runs_every_step(self, node: cst.CSTNode) -> bool:
        facts = self.facts
        scope = facts.index.scope_of(node)
        if isinstance(scope, cst.FunctionDef):
            owner = facts.index.enclosing(scope, cst.ClassDef)
            if scope.name.value == "forward" and facts.modules.class_of(scope) is not None:
                return True
            if scope.name.value == "step" and owner is not None and any(
                (dotted(base.value) or "").endswith("Optimizer") for base in owner.bases
            ):
                return True
        for call in self.gradient_calls(scope):
            loop = self._innermost_loop(call, scope)
            if loop is not None and facts.index.is_inside(node, loop):
                return True
            if loop is None and facts.index.before(call, node):
                return True
        return False

    def runs_during_training(self, node: cst.CSTNode) -> bool:
        """`runs_every_step`, or in a function of this file that runs while a
        model trains: called (directly, as a method of a model, or passed on
        as a callback) from code that runs every step, from code after an
        optimizer was built in the same function, or from code between a
        forward and a gradient computation of the same function. Calls made
        while a module is being constructed (`__init__`) do not count."""
        if self.runs_every_step(node):
            return True
        scope = self.facts.index.scope_of(node)
        return isinstance(scope, cst.FunctionDef) and self._called_during_training(scope, set())

    def _called_during_training(self, function: cst.FunctionDef, seen: set) -> bool:
        if function in self._training_callee:
            return self._training_callee[function]
        if function in seen or function.name.value == "__init__":
            return False
        seen.add(function)
        result = False
        for site in self._call_sites.get(function, ()):
            caller = self.facts.index.scope_of(site)
            if isinstance(caller, cst.FunctionDef) and caller.name.value == "__init__":
                continue
            if self.runs_every_step(site) or self._optimizer_built_before(site, caller) or self._between_forward_and_backward(site, caller):
                result = True
            elif isinstance(caller, cst.FunctionDef):
                result = self._called_during_training(caller, seen)
            if result:
                break
        self._training_callee[function] = result
        return result

    @cached_property
    def _training_callee(self) -> Dict[cst.FunctionDef, bool]:
        return {}

    @cached_property
    def _call_sites(self) -> Dict[cst.FunctionDef, List[cst.Call]]:
        """The calls of the file that may run each of its functions."""
        facts = self.facts
        index = facts.index
        model_methods: Dict[str, List[cst.FunctionDef]] = {}
        for module_class in facts.modules.classes.values():
            for function in index.descendants(module_class.node.body, cst.FunctionDef):
                if index.parent(index.parent(function)) is module_class.node:
                    model_methods.setdefault(function.name.value, []).append(function)
        plain = {
            function.name.value: function
            for function in index.nodes(cst.FunctionDef)
            if not isinstance(index.parent(index.parent(function)), cst.ClassDef)
        }
        sites: Dict[cst.FunctionDef, List[cst.Call]] = {}
        for call in index.nodes(cst.Call):
            called = list(facts.intent.helpers_called(call))
            func = call.func
            if not called and isinstance(func, cst.Attribute) and func.attr.value in model_methods:
                # `net.prune()`: a method of a module class of this file, on a model.
                if facts.values.holds(func.value) & Holds.MODEL:
                    called = model_methods[func.attr.value]
            # `Remover(prune_filters)`: a function handed on, run by whoever holds it.
            called += [plain[arg.value.value] for arg in call.args if isinstance(arg.value, cst.Name) and arg.value.value in plain]
            for function in called:
                sites.setdefault(function, []).append(call)
        return sites

    @cached_property
    def _optimizers_built(self) -> Dict[cst.CSTNode, int]:
        """Per scope, the source position of its first optimizer construction."""
        found: Dict[cst.CSTNode, int] = {}
        for call in self.facts.index.nodes(cst.Call):
            if self.facts.values.holds(call) & Holds.OPTIMIZER and isinstance(call.func, (cst.Attribute, cst.Name)):
                if (self.facts.names.qualified(call.func) or "").startswith("torch.optim."):
                    scope = self.facts.index.scope_of(call)
                    order = self.facts.index.order[call]
                    found[scope] = min(order, found.get(scope, order))
        return found

    def _optimizer_built_before(self, site: cst.CSTNode, scope: cst.CSTNode) -> bool:
        built = self._optimizers_built.get(scope)
        return built is not None and built < self.facts.index.order[site]

    def _between_forward_and_backward(self, site: cst.CSTNode, scope: cst.CSTNode) -> bool:
        """A model ran a forward in `scope` before `site` (itself or through a
        function of this file), and gradients are computed after it."""
        facts = self.facts
        index = facts.index
        forward = backward = False
        for call in index.descendants(scope, cst.Call):
            if index.scope_of(call) is not scope or call is site:
                continue
            if index.before(call, site):
                forward = forward or self._runs_forward(call)
            elif not index.is_inside(call, site):
                backward = backward or self._asks_for_gradients(call) or facts.intent.calls_training_helper(call)
        return forward and backward

    def _runs_forward(self, call: cst.Call) -> bool:
        values = self.facts.values
        if values.holds(call.func) & Holds.MODEL and values.holds(call) & Holds.ACTIVATION:
            return True
        return any(
            values.holds(inner.func) & Holds.MODEL and values.holds(inner) & Holds.ACTIVATION
            for function in self.facts.intent.helpers_called(call)
            for inner in self.facts.index.descendants(function.body, cst.Call)
        )

    def _innermost_loop(self, node: cst.CSTNode, scope: cst.CSTNode) -> Optional[cst.CSTNode]:
        for ancestor in self.facts.index.ancestors(node):
            if ancestor is scope:
                return None
            if isinstance(ancestor, (cst.For, cst.While)) and self.facts.index.is_inside(node, ancestor.body):
                return ancestor
        return None
