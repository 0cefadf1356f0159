"""What a piece of code is for: training or evaluation.

Answers the questions the evaluation and training rules share: does this
function compute gradients (backward, `torch.autograd.grad`, an optimizer
step, inputs switched to `requires_grad_()`), is a model in eval mode at a
given point, and does a function's name say it evaluates.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Dict, List, Optional, Sequence, Tuple

import libcst as cst

from detachlint.analysis.index import FileIndex
from detachlint.analysis.names import ImportTable, built_by_import, dotted
from detachlint.analysis.vocabulary import BACKWARD_METHODS, GRADIENT_FUNCTIONS, MODULE_API, MODULE_RETURNING_SELF
from detachlint.analysis.priors import EVAL_WORDS, TEST_CLASS_NAME, TEST_FILE_NAME

# Calls that ask for gradients: computing them, or turning recording back on.
_GRADIENT_CALLS = GRADIENT_FUNCTIONS | {"torch.enable_grad"}
_GRADIENT_CALL_TAILS = frozenset(name.rpartition(".")[2] for name in _GRADIENT_CALLS)
# ... and methods: backward, making a leaf that records, an optimizer step.
_GRADIENT_METHODS = BACKWARD_METHODS | {"requires_grad_", "step"}
# Lightning runs these hooks under no_grad itself.
_FRAMEWORK_HOOK = re.compile(r"(validation|test|predict)_(step|epoch_end)|on_(validation|test|predict)_\w+")




def _same_model(receiver: cst.BaseExpression, model: str, index, submodules: bool = True) -> bool:
    """`model.eval()`, also for `model.encoder` when `submodules` (`eval()`
    and `train()` switch every submodule); for `models["g"]`, also
    `models[key].eval()` (a loop over a dict of models switches each)."""
    name = dotted(receiver)
    if name == model or (submodules and name and not index.is_receiver(receiver) and model.startswith(name + ".")):
        return True
    if "[" in model and isinstance(receiver, cst.Subscript):
        return dotted(receiver.value) == model.split("[", 1)[0]
    return False


def _literal(expr: cst.BaseExpression, arguments: Dict[str, cst.BaseExpression]):
    """The Python value of a literal, or of a parameter bound to one; `...` when unknown."""
    if isinstance(expr, cst.Name):
        if expr.value in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[expr.value]
        bound = arguments.get(expr.value)
        return _literal(bound, {}) if bound is not None else ...
    if isinstance(expr, cst.SimpleString):
        return expr.evaluated_value
    if isinstance(expr, cst.Integer):
        return int(expr.value)
    return ...


def _literal_truth(test: cst.BaseExpression, arguments: Dict[str, cst.BaseExpression]) -> Optional[bool]:
    """Whether `test` holds, when the parameters it reads are bound to
    literals (`train`, `not eval`, `opt is not None`, `mode == "train"`);
    None when that is not known."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        inner = _literal_truth(test.expression, arguments)
        return None if inner is None else not inner
    if isinstance(test, cst.BooleanOperation):
        left, right = _literal_truth(test.left, arguments), _literal_truth(test.right, arguments)
        if isinstance(test.operator, cst.And):
            return False if False in (left, right) else (True if left and right else None)
        return True if True in (left, right) else (False if left is False and right is False else None)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        target = test.comparisons[0]
        left, right = _literal(test.left, arguments), _literal(target.comparator, arguments)
        if left is ... or right is ...:
            return None
        operator = target.operator
        if isinstance(operator, (cst.Is, cst.Equal)):
            return left == right
        if isinstance(operator, (cst.IsNot, cst.NotEqual)):
            return left != right
        return None
    value = _literal(test, arguments)
    return None if value is ... else bool(value)


def _returns_first(statement: cst.If, arguments: Dict[str, cst.BaseExpression]) -> bool:
    """Whether the `if` surely returns or raises, with parameters bound to
    `arguments`: its test is known and the branch taken ends in either."""
    taken = _literal_truth(statement.test, arguments)
    if taken is None:
        return False
    block = statement.body if taken else (statement.orelse.body if isinstance(statement.orelse, cst.Else) else None)
    last = block.body[-1] if block is not None and block.body else None
    return isinstance(last, cst.SimpleStatementLine) and isinstance(last.body[-1], (cst.Return, cst.Raise))


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
    return any(word in EVAL_WORDS for word in _words(name))


class Intent:
    def __init__(self, index: FileIndex, names: ImportTable, path: str = "") -> None:
        self._index = index
        self._names = names
        # `test_net.py` in a research repo is an evaluation script; a test
        # file also imports a test framework.
        frameworks = {q.split(".")[0] for q in names.aliases.values()}
        self._test_file = bool(TEST_FILE_NAME.search(path.replace("\\", "/"))) and bool(
            frameworks & {"pytest", "unittest"}
        )
        self._computes_gradients: Dict[cst.CSTNode, bool] = {}
        self._direct_requests: Dict[cst.CSTNode, list] = {}
        self._requests: Dict[cst.CSTNode, list] = {}
        self._for_life: Dict[tuple, bool] = {}
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
            # pytest collects `test_*` functions, and methods only of test
            # classes: Lightning's `test_step` is no test.
            if isinstance(ancestor, cst.FunctionDef) and is_pytest_test(ancestor.name.value) and not self._index.is_method(ancestor):
                return True
            if isinstance(ancestor, cst.ClassDef):
                if TEST_CLASS_NAME.search(ancestor.name.value):
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

    @cached_property
    def functions_computing_gradients(self) -> frozenset:
        """Every function that asks for gradients somewhere inside it (nested
        code included): `computes_gradients` for all of them in one walk."""
        found = set()
        for call in self._index.nodes(cst.Call):
            if self._is_gradient_call(call):
                found.update(a for a in self._index.ancestors(call) if isinstance(a, cst.FunctionDef))
        return frozenset(found)

    def gradient_requests(self, scope: cst.CSTNode) -> list:
        """The calls in `scope` that ask for gradients, directly or through a
        function or method of this file."""
        if scope not in self._requests:
            self._requests[scope] = [
                call for call in self._index.descendants(scope, cst.Call)
                if self._is_gradient_call(call) or self.calls_training_helper(call)
            ]
        return self._requests[scope]

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

    def functions_named(self, name: str) -> list:
        """Every `def name(...)` of the file, functions and methods alike."""
        return list(self._functions_by_name.get(name, ()))

    def helpers_called(self, call: cst.Call) -> list:
        """The functions of this file `call` may run: `step(...)` a function
        named `step`, `self.step(...)` a method `step` of the calling class."""
        func = call.func
        if isinstance(func, cst.Name):
            return [f for f in self._functions_by_name.get(func.value, ()) if not self._index.is_method(f)]
        if isinstance(func, cst.Attribute) and self._index.is_receiver(func.value):
            candidates = self._functions_by_name.get(func.attr.value, ())
            owner = self._index.enclosing(call, cst.ClassDef)
            if owner is None:
                return list(candidates)
            for klass in self.class_chain(owner):  # the nearest definition wins, as in Python
                found = [f for f in candidates if self._index.parent(self._index.parent(f)) is klass]
                if found:
                    if len(found) == 1 and is_abstract(found[0]):
                        # A template method: what runs is a subclass's override.
                        return self._overrides(klass, candidates) or found
                    return found
        return []

    def _overrides(self, klass: cst.ClassDef, candidates: Sequence[cst.FunctionDef]) -> list:
        """The definitions among `candidates` in the file's subclasses of `klass`."""
        found = []
        for function in candidates:
            owner = self._index.parent(self._index.parent(function))
            if isinstance(owner, cst.ClassDef) and owner is not klass and klass in self.class_chain(owner):
                found.append(function)
        return found

    def methods_called(self, call: cst.Call) -> list:
        """`obj.m(...)` on an object other than `self`: the method `m` of the
        one class of this file that defines it (`model.predict(batch)` runs
        `predict` of the file's model class). Empty when no class or several
        define `m`, when `m` is one of `nn.Module`'s own methods, or when `obj`
        is an imported module or an object built by one."""
        func = call.func
        if not isinstance(func, cst.Attribute) or func.attr.value in MODULE_API:
            return []
        receiver = func.value
        if self._index.is_receiver(receiver) or (isinstance(receiver, cst.Name) and receiver.value == "super"):
            return []
        if isinstance(receiver, cst.Call) or self._names.qualified(receiver) is not None:
            return []
        if built_by_import(receiver, self._index, self._names):
            return []  # `self.ret_rms.update(x)`: another module's object
        methods = [f for f in self._functions_by_name.get(func.attr.value, ()) if self._index.is_method(f)]
        owners = {self._index.parent(self._index.parent(f)) for f in methods}
        return methods if len(owners) == 1 else []

    def class_chain(self, klass: Optional[cst.ClassDef]) -> list:
        """`klass` and its base classes defined in this file, nearest first."""
        chain: list = []
        while klass is not None and klass not in chain:
            chain.append(klass)
            bases = {dotted(base.value) for base in klass.bases}
            klass = next((c for c in self._index.nodes(cst.ClassDef) if c.name.value in bases), None)
        return chain

    def calls_training_helper(self, call: cst.Call) -> bool:
        """`train_step(...)`, `self.update(...)`, `agent.update(...)`: a
        function or method of this file that asks for gradients."""
        return any(
            self._trains_when_called(function, call)
            for function in [*self.helpers_called(call), *self.methods_called(call)]
        )

    def _trains_when_called(self, function: cst.FunctionDef, call: cst.Call) -> bool:
        """Whether `function` asks for gradients when `call` runs it: not when
        each request sits under an `if` that the call's literal arguments
        rule out (`if not eval: loss.backward()` for `eval=True`)."""
        if not self.computes_gradients(function):
            return False
        if function not in self._direct_requests:
            self._direct_requests[function] = [
                request for request in self._index.descendants(function, cst.Call) if self._is_gradient_call(request)
            ]
        return any(not self.dead_for_call(request, function, call) for request in self._direct_requests[function])

    def _is_gradient_call(self, call: cst.Call) -> bool:
        func = call.func
        if isinstance(func, cst.Attribute):
            if func.attr.value in _GRADIENT_METHODS:
                return True
            tail = func.attr.value
        elif isinstance(func, cst.Name):
            tail = func.value
            if tail in self._names.aliases:  # `from torch.autograd import grad as g`
                return self._names.qualified(func) in _GRADIENT_CALLS
        else:
            return False
        # The name's last part first: asking the import table for every call costs.
        return tail in _GRADIENT_CALL_TAILS and self._names.qualified(func) in _GRADIENT_CALLS

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
                    receiver = self._index.receiver(call)
                    if name and receiver and name.startswith(receiver + "."):
                        names.add(name)
            self._switched_in_class[owner] = frozenset(names)
        return self._switched_in_class[owner]

    @property
    def switches_anywhere(self) -> bool:
        """Whether the file calls `.eval()` or `.train(...)` on anything."""
        return bool(self._eval_scopes)

    def switches_to_eval(self, scope: cst.CSTNode) -> bool:
        """Whether `scope` calls `.eval()` or `.train(...)` on anything."""
        return scope in self._eval_scopes

    def eval_switch_before(
        self, model: str, at: cst.CSTNode, scope: cst.CSTNode, submodules: bool = True
    ) -> Optional[bool]:
        """True if the last `model.eval()`/`model.train(...)` before `at` in
        `scope` put it in eval mode; False if in train mode, or if that call
        sits in one branch of an `if`; None if neither was called. With
        `submodules`, a switch of `model` also counts for `model.encoder`."""
        state, switch = None, None
        order = self._index.order[at]
        for call in self._index.descendants(scope, cst.Call):
            if self._index.order[call] >= order:
                break
            func = call.func
            if not isinstance(func, cst.Attribute):
                continue
            if not _same_model(func.value, model, self._index, submodules) and self._chain_bound_to(call) != model:
                continue
            if func.attr.value == "eval" and not call.args:
                state, switch = True, call
            elif func.attr.value == "train":
                flag = call.args[0].value if call.args else None
                state, switch = isinstance(flag, cst.Name) and flag.value == "False", call
        if switch is not None and self._in_branch_without(switch, at, scope):
            return False  # `if train: model.train() else: model.eval()`: not known to evaluate
        return state

    def _chain_bound_to(self, call: cst.Call) -> Optional[str]:
        """`net` for the `.eval()` of `net = Net().eval().to(device)`: a module's
        `eval`, `train` and `to` return the module itself, so the name bound to
        the chain holds the switched module."""
        node: cst.CSTNode = call
        while True:
            parent = self._index.parent(node)
            outer = self._index.parent(parent) if isinstance(parent, cst.Attribute) else None
            if isinstance(outer, cst.Call) and outer.func is parent and parent.attr.value in MODULE_RETURNING_SELF:
                node = outer
                continue
            break
        parent = self._index.parent(node)
        if isinstance(parent, cst.Assign) and parent.value is node and len(parent.targets) == 1:
            return dotted(parent.targets[0].target)
        return None

    def bound_arguments(self, call: cst.Call, function: cst.FunctionDef) -> Dict[str, cst.BaseExpression]:
        """Parameter name -> the expression `call` passes for it (a default
        when it passes none); `self` is skipped for a method. Stops at
        `*args`/`**kwargs`, whose contents are unknown."""
        params = function.params
        positional = self.positional_params(function)
        bound: Dict[str, cst.BaseExpression] = {
            p.name.value: p.default for p in [*positional, *params.kwonly_params] if p.default is not None
        }
        for position, arg in enumerate(call.args):
            if arg.star:
                break
            if arg.keyword is not None:
                bound[arg.keyword.value] = arg.value
            elif position < len(positional):
                bound[positional[position].name.value] = arg.value
        return bound

    def positional_params(self, function: cst.FunctionDef) -> List[cst.Param]:
        """The parameters a call fills by position, in order: `self` of a method left out."""
        positional = [*function.params.posonly_params, *function.params.params]
        if self._index.is_method(function) and not any(dotted(d.decorator) == "staticmethod" for d in function.decorators):
            positional = positional[1:]
        return positional

    def dead_for_call(self, node: cst.CSTNode, function: cst.FunctionDef, call: cst.Call) -> bool:
        """Whether `node`, inside `function`, cannot run when `call` runs the
        function: an enclosing `if` tests a parameter that `call` passes as a
        literal (`if train: loss.backward()` for `run_epoch(..., train=False)`),
        or an `if` before it leaves the function on that call
        (`if not keep: return loss.detach()` before `return loss`)."""
        arguments = self.bound_arguments(call, function)
        child = node
        for ancestor in self._index.ancestors(node):
            if ancestor is function:
                return False
            if isinstance(ancestor, cst.If):
                value = _literal_truth(ancestor.test, arguments)
                if value is not None and value != self._index.is_inside(node, ancestor.body):
                    return True
            if isinstance(ancestor, cst.IndentedBlock) and child in ancestor.body:
                before = ancestor.body[: ancestor.body.index(child)]
                if any(_returns_first(s, arguments) for s in before if isinstance(s, cst.If)):
                    return True
            child = ancestor
        return False

    def branch_for_call(self, value: cst.BaseExpression, function: cst.FunctionDef, call: cst.Call) -> cst.BaseExpression:
        """The branch of a returned `a if flag else b` that `call` takes when
        it passes (or leaves at its default) literals for the parameters the
        test reads (`loss.detach() if detach else loss`, `detach=True`)."""
        while isinstance(value, cst.IfExp):
            taken = _literal_truth(value.test, self.bound_arguments(call, function))
            if taken is None:
                return value
            value = value.body if taken else value.orelse
        return value

    def eval_for_life(self, model: str, at: cst.CSTNode) -> bool:
        """Whether `model` (`self`, `self.net`) at `at`, in a method, was put
        in eval mode by its class's `__init__` (`self.eval()`,
        `self.net.eval()`, not under an `if`) while nothing in the class
        switches it back with `.train()` or asks for gradients: an inference
        wrapper, in eval mode for its whole life."""
        receiver = self._index.receiver(at)
        if receiver is None or (model != receiver and not model.startswith(receiver + ".")):
            return False
        owner = self._index.enclosing(at, cst.ClassDef)
        if owner is None or self.computes_gradients(owner):
            return False
        if (owner, model) not in self._for_life:
            self._for_life[(owner, model)] = self._switched_in_init_only(owner, model)
        return self._for_life[(owner, model)]

    def _switched_in_init_only(self, owner: cst.ClassDef, model: str) -> bool:
        switched = False
        for call in self._index.descendants(owner, cst.Call):
            func = call.func
            name = dotted(func.value) if isinstance(func, cst.Attribute) else None
            if name is None or func.attr.value not in ("eval", "train"):
                continue
            covers = name == model or model.startswith(name + ".")
            if func.attr.value == "train" and (covers or name.startswith(model + ".")):
                return False
            method = self._index.enclosing(call, cst.FunctionDef)
            if covers and not call.args and method is not None and method.name.value == "__init__":
                guard = self._index.enclosing(call, cst.If)
                switched = switched or guard is None or not self._index.is_inside(guard, method)
        return switched

    def eval_branch(self, model: str, at: cst.CSTNode, scope: cst.CSTNode) -> Optional[Tuple[str, bool]]:
        """When the last switch of `model` before `at` in `scope` is `.eval()`
        in one branch of an `if` that does not hold `at`
        (`if is_train: model.train() else: model.eval()`): the condition under
        which eval mode runs, as `condition_of` gives it (`("is_train", False)`)."""
        switch = None
        order = self._index.order[at]
        for call in self._index.descendants(scope, cst.Call):
            if self._index.order[call] >= order:
                break
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("eval", "train") and _same_model(func.value, model, self._index):
                switch = call
        if switch is None or switch.args or switch.func.attr.value != "eval":  # type: ignore[attr-defined]
            return None
        for ancestor in self._index.ancestors(switch):
            if ancestor is scope:
                return None
            if isinstance(ancestor, cst.If):
                if self._index.is_inside(at, ancestor):
                    return None
                return self._branch_condition(switch, ancestor)
        return None

    def gradients_only_when(self, loop: cst.CSTNode, scope: cst.CSTNode, condition: Tuple[str, bool]) -> bool:
        """Whether every request for gradients in `loop`, and in `scope` after
        it, sits in a branch taken only under `condition`
        (`if is_train: loss.backward()` for `("is_train", True)`)."""
        start = self._index.order[loop]
        found = False
        for call in self._index.descendants(scope, cst.Call):
            if self._index.order[call] <= start:
                continue
            if self._index.scope_of(call) is not scope and not self._index.is_inside(call, loop):
                continue
            if not (self._is_gradient_call(call) or self.calls_training_helper(call)):
                continue
            found = True
            if not any(
                self._branch_condition(call, ancestor) == condition
                for ancestor in self._index.ancestors(call)
                if isinstance(ancestor, cst.If) and self._index.is_inside(ancestor, scope)
            ):
                return False
        return found

    def _branch_condition(self, node: cst.CSTNode, branch: cst.If) -> Tuple[str, bool]:
        """The condition under which `node`, in one branch of `branch`, runs."""
        text, polarity = self.condition_of(branch.test)
        return text, polarity if self._index.is_inside(node, branch.body) else not polarity

    def condition_of(self, test: cst.BaseExpression) -> Tuple[str, bool]:
        """A test as (text, polarity): `not is_train` is `("is_train", False)`,
        `opt is not None` is `("opt is None", False)`."""
        polarity = True
        while isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test, polarity = test.expression, not polarity
        code = self._index.module.code_for_node
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
            target = test.comparisons[0]
            if isinstance(target.operator, (cst.NotEqual, cst.IsNot)):
                word = "==" if isinstance(target.operator, cst.NotEqual) else "is"
                return f"{code(test.left)} {word} {code(target.comparator)}", not polarity
            word = "==" if isinstance(target.operator, cst.Equal) else "is" if isinstance(target.operator, cst.Is) else None
            if word is not None:
                return f"{code(test.left)} {word} {code(target.comparator)}", polarity
        return " ".join(code(test).split()), polarity

    def _in_branch_without(self, node: cst.CSTNode, other: cst.CSTNode, scope: cst.CSTNode) -> bool:
        """Whether `node` sits in a branch (if/else/conditional expression)
        that does not also hold `other`."""
        for ancestor in self._index.ancestors(node):
            if ancestor is scope:
                return False
            if isinstance(ancestor, (cst.If, cst.Else, cst.IfExp)) and not self._index.is_inside(other, ancestor):
                return True
        return False


def is_abstract(function: cst.FunctionDef) -> bool:
    """A body that only documents or refuses: `raise NotImplementedError`,
    `pass`, `...`, a docstring (a template method's base definition)."""
    body = function.body
    if isinstance(body, cst.SimpleStatementSuite):  # `def step(self): raise NotImplementedError`
        lines = [body]
    elif all(isinstance(statement, cst.SimpleStatementLine) for statement in body.body):
        lines = list(body.body)
    else:
        return False
    for statement in lines:
        for small in statement.body:
            if isinstance(small, cst.Pass):
                continue
            if isinstance(small, cst.Expr) and isinstance(small.value, (cst.Ellipsis, cst.SimpleString, cst.ConcatenatedString)):
                continue
            if isinstance(small, cst.Raise) and small.exc is not None and dotted(
                small.exc.func if isinstance(small.exc, cst.Call) else small.exc
            ) == "NotImplementedError":
                continue
            return False
    return True
