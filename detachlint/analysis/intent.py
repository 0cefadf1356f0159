"""What a piece of code is for: training or evaluation.

Answers the questions the evaluation and training rules share: does this
function compute gradients (backward, `torch.autograd.grad`, an optimizer
step, inputs switched to `requires_grad_()`), is a model in eval mode at a
given point, and does a function's name say it evaluates.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Dict, Optional

import libcst as cst

from detachlint.analysis.index import FileIndex
from detachlint.analysis.names import ImportTable, dotted

_EVAL_WORDS = {
    "eval", "evaluate", "evaluation", "evaluator", "validate", "validation", "val", "valid",
    "test", "testing", "predict", "prediction", "predictions", "infer", "inference",
}
_GRADIENT_CALLS = {"torch.autograd.grad", "torch.autograd.backward", "torch.enable_grad"}
_GRADIENT_METHODS = {"backward", "requires_grad_", "step", "manual_backward"}
# Lightning runs these hooks under no_grad itself.
_FRAMEWORK_HOOK = re.compile(r"(validation|test|predict)_(step|epoch_end)|on_(validation|test|predict)_\w+")


_TEST_FILE = re.compile(r"(^|/)(test_[^/]*|[^/]*_test|conftest)\.py$")
_TEST_CLASS = re.compile(r"^Test|Tests?$|TestCase$")


def _same_model(receiver: cst.BaseExpression, model: str) -> bool:
    """`model.eval()`; for `models["g"]`, also `models[key].eval()` (a loop
    over a dict of models switches each of them)."""
    if dotted(receiver) == model:
        return True
    if "[" in model and isinstance(receiver, cst.Subscript):
        return dotted(receiver.value) == model.split("[", 1)[0]
    return False


def _words(name: str):
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name)
    return [w.lower() for w in spaced.split("_") if w]


def is_pytest_test(name: str) -> bool:
    return name.startswith("test_") or (name.startswith("test") and name[4:5].isupper())


def is_evaluation_name(name: str) -> bool:
    """`evaluate`, `run_validation`, `predictEpoch`; not pytest's `test_*`."""
    if is_pytest_test(name):
        return False
    if _FRAMEWORK_HOOK.fullmatch(name):
        return False
    return any(word in _EVAL_WORDS for word in _words(name))


class Intent:
    def __init__(self, index: FileIndex, names: ImportTable, path: str = "") -> None:
        self._index = index
        self._names = names
        # `test_net.py` in a research repo is an evaluation script; a test
        # file also imports a test framework.
        frameworks = {q.split(".")[0] for q in names.aliases.values()}
        self._test_file = bool(_TEST_FILE.search(path.replace("\\", "/"))) and bool(
            frameworks & {"pytest", "unittest"}
        )
        self._computes_gradients: Dict[cst.CSTNode, bool] = {}
        self._switched_in_class: Dict[cst.CSTNode, frozenset] = {}
        self._eval_scopes = {
            index.scopes[call]
            for call in index.nodes(cst.Call)
            if isinstance(call.func, cst.Attribute) and call.func.attr.value in ("eval", "train")
        }

    def is_test_code(self, node: cst.CSTNode) -> bool:
        """pytest and unittest code: a test file, a `test_*` function, a `Test*` class."""
        if self._test_file:
            return True
        for ancestor in self._index.ancestors(node):
            if isinstance(ancestor, cst.FunctionDef) and is_pytest_test(ancestor.name.value):
                return True
            if isinstance(ancestor, cst.ClassDef):
                if _TEST_CLASS.search(ancestor.name.value):
                    return True
                if any((dotted(base.value) or "").endswith("TestCase") for base in ancestor.bases):
                    return True
        return False

    def computes_gradients(self, scope: cst.CSTNode) -> bool:
        """Whether `scope` asks for gradients anywhere (nested code included)."""
        if scope not in self._computes_gradients:
            self._computes_gradients[scope] = any(
                self._is_gradient_call(call) for call in self._index.descendants(scope, cst.Call)
            )
        return self._computes_gradients[scope]

    def loop_computes_gradients(self, loop: cst.CSTNode, scope: cst.CSTNode) -> bool:
        """Whether a loop takes part in training: it asks for gradients in its
        body or through a function of this file it calls, or its scope asks
        for them after the loop starts with no `.train()` switch in between
        (outputs gathered in the loop, backpropagated after it). A validation
        loop that follows the training loop of the same `main` does not."""
        index = self._index
        for call in index.descendants(loop, cst.Call):
            if self._is_gradient_call(call) or self.calls_training_helper(call):
                return True
        start = index.order[loop]
        switched_back = False
        for call in index.descendants(scope, cst.Call):
            if index.order[call] <= start or index.is_inside(call, loop) or index.scope_of(call) is not scope:
                continue
            if isinstance(call.func, cst.Attribute) and call.func.attr.value == "train":
                switched_back = True
            elif not switched_back and (self._is_gradient_call(call) or self.calls_training_helper(call)):
                return True
        return False

    @cached_property
    def _functions_by_name(self) -> Dict[str, list]:
        found: Dict[str, list] = {}
        for function in self._index.nodes(cst.FunctionDef):
            found.setdefault(function.name.value, []).append(function)
        return found

    def helpers_called(self, call: cst.Call) -> list:
        """The functions of this file `call` may run: `step(...)` a function
        named `step`, `self.step(...)` a method `step` of the calling class."""
        func = call.func
        if isinstance(func, cst.Name):
            return [f for f in self._functions_by_name.get(func.value, ()) if not self._is_method(f)]
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in ("self", "cls"):
            candidates = self._functions_by_name.get(func.attr.value, ())
            owner = self._index.enclosing(call, cst.ClassDef)
            if owner is None:
                return list(candidates)
            for klass in self.class_chain(owner):  # the nearest definition wins, as in Python
                found = [f for f in candidates if self._index.parent(self._index.parent(f)) is klass]
                if found:
                    return found
        return []

    def class_chain(self, klass: Optional[cst.ClassDef]) -> list:
        """`klass` and its base classes defined in this file, nearest first."""
        chain: list = []
        while klass is not None and klass not in chain:
            chain.append(klass)
            bases = {dotted(base.value) for base in klass.bases}
            klass = next((c for c in self._index.nodes(cst.ClassDef) if c.name.value in bases), None)
        return chain

    def _is_method(self, function: cst.FunctionDef) -> bool:
        parent = self._index.parent(function)
        return isinstance(self._index.parent(parent) if parent is not None else None, cst.ClassDef)

    def calls_training_helper(self, call: cst.Call) -> bool:
        """`train_step(...)`, `self.update(...)`: a function of this file that
        asks for gradients."""
        return any(self.computes_gradients(function) for function in self.helpers_called(call))

    def _is_gradient_call(self, call: cst.Call) -> bool:
        if isinstance(call.func, cst.Attribute) and call.func.attr.value in _GRADIENT_METHODS:
            return True
        return self._names.qualified(call.func) in _GRADIENT_CALLS

    def switched_in_class(self, node: cst.CSTNode) -> frozenset:
        """`self.x` names the class around `node` switches with `.eval()` or
        `.train()`: modules, whatever their names say."""
        owner = self._index.enclosing(node, cst.ClassDef)
        if owner is None:
            return frozenset()
        if owner not in self._switched_in_class:
            names = set()
            for call in self._index.descendants(owner, cst.Call):
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value in ("eval", "train"):
                    name = dotted(func.value)
                    if name and name.startswith("self."):
                        names.add(name)
            self._switched_in_class[owner] = frozenset(names)
        return self._switched_in_class[owner]

    def switches_to_eval(self, scope: cst.CSTNode) -> bool:
        """Whether `scope` calls `.eval()` or `.train(...)` on anything."""
        return scope in self._eval_scopes

    def eval_switch_before(self, model: str, at: cst.CSTNode, scope: cst.CSTNode) -> Optional[bool]:
        """True if the last `model.eval()`/`model.train(...)` before `at` in
        `scope` put it in eval mode; False if in train mode, or if that call
        sits in one branch of an `if`; None if neither was called."""
        state, switch = None, None
        order = self._index.order[at]
        for call in self._index.descendants(scope, cst.Call):
            if self._index.order[call] >= order:
                break
            func = call.func
            if not isinstance(func, cst.Attribute) or not _same_model(func.value, model):
                continue
            if func.attr.value == "eval" and not call.args:
                state, switch = True, call
            elif func.attr.value == "train":
                flag = call.args[0].value if call.args else None
                state, switch = isinstance(flag, cst.Name) and flag.value == "False", call
        if switch is not None and self._in_branch_without(switch, at, scope):
            return False  # `if train: model.train() else: model.eval()`: not known to evaluate
        return state

    def _in_branch_without(self, node: cst.CSTNode, other: cst.CSTNode, scope: cst.CSTNode) -> bool:
        """Whether `node` sits in a branch (if/else/conditional expression)
        that does not also hold `other`."""
        for ancestor in self._index.ancestors(node):
            if ancestor is scope:
                return False
            if isinstance(ancestor, (cst.If, cst.Else, cst.IfExp)) and not self._index.is_inside(other, ancestor):
                return True
        return False
