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
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional

import libcst as cst

from detachlint.analysis.names import dotted
from detachlint.analysis.values import Holds

if TYPE_CHECKING:  # pragma: no cover
    from detachlint.analysis import Facts

_GRADIENT_FUNCTIONS = {"torch.autograd.grad", "torch.autograd.backward"}
_BACKWARD_METHODS = {"backward", "manual_backward"}


class StepPhases:
    def __init__(self, facts: "Facts") -> None:
        self.facts = facts
        self._gradient_calls: Dict[cst.CSTNode, List[cst.Call]] = {}
        for call in facts.index.nodes(cst.Call):
            if self._asks_for_gradients(call):
                self._gradient_calls.setdefault(facts.index.scope_of(call), []).append(call)

    def _asks_for_gradients(self, call: cst.Call) -> bool:
        func = call.func
        if self.facts.names.qualified(func) in _GRADIENT_FUNCTIONS:
            return True
        if not isinstance(func, cst.Attribute):
            return False
        if func.attr.value in _BACKWARD_METHODS:
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

    def _innermost_loop(self, node: cst.CSTNode, scope: cst.CSTNode) -> Optional[cst.CSTNode]:
        for ancestor in self.facts.index.ancestors(node):
            if ancestor is scope:
                return None
            if isinstance(ancestor, (cst.For, cst.While)) and self.facts.index.is_inside(node, ancestor.body):
                return ancestor
        return None
