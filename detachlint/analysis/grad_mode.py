"""Where gradient recording is off.

A node runs with autograd disabled when an enclosing `with` block or a
decorator of an enclosing function is `torch.no_grad()`,
`torch.inference_mode()` or `torch.set_grad_enabled(False)`, or the function
is rebound to itself wrapped in one (`evaluate = torch.no_grad()(evaluate)`;
the innermost one decides: `torch.enable_grad()` turns it back on), when an earlier
statement of an enclosing block called `torch.set_grad_enabled(False)`, or
when every call of the enclosing function happens with autograd disabled:
the calls in the same file, and for a top-level function or a method of a
top-level class the calls other files of the run make
(`analysis/project.py`). `set_grad_enabled(flag)` with a flag only known
at run time, and a project's own wrapper whose name says no_grad or inference mode
(`@smart_inference_mode()`), count as "maybe disabled", which callers treat
as disabled: a rule must not flag code that may well be correct.
"""

from __future__ import annotations

from enum import Enum
from functools import cached_property
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Sequence, Tuple

import libcst as cst

from detachlint.analysis.index import FileIndex
from detachlint.analysis.names import ImportTable, built_by_import, dotted
from detachlint.analysis.vocabulary import GRAD_MODE_MANAGERS, MODULE_API
from detachlint.analysis.priors import NO_GRAD_WRAPPER_NAME

if TYPE_CHECKING:
    from detachlint.analysis.project import ExternalCall


class Mode(Enum):
    DISABLED = "disabled"
    ENABLED = "enabled"
    MAYBE_DISABLED = "maybe-disabled"




_OPPOSITE = {Mode.DISABLED: Mode.ENABLED, Mode.ENABLED: Mode.DISABLED}


def _literal_bool(arg: cst.Arg) -> Optional[bool]:
    value = arg.value
    if isinstance(value, cst.Name) and value.value in ("True", "False"):
        return value.value == "True"
    return None


# The only nodes that can set the mode of the code inside them, asked of every
# ancestor of many nodes: a type lookup is much faster than isinstance() on
# libcst's node classes.
_MODE_SETTING = frozenset({cst.With, cst.FunctionDef, cst.If, cst.IndentedBlock, cst.Module})


class GradMode:
    def __init__(self, index: FileIndex, names: ImportTable, elsewhere: Optional[Mapping[str, Sequence["ExternalCall"]]] = None) -> None:
        self._index = index
        self._names = names
        self._elsewhere = elsewhere or {}
        self._callers_cache: Dict[cst.FunctionDef, bool] = {}
        self._in_progress: set = set()
        self._inference_cache: Dict[cst.FunctionDef, bool] = {}
        self._statement_switches = self._find_statement_switches()
        self._wrappers = self._find_wrappers()

    def mode_of(self, expr: cst.BaseExpression) -> Optional[Mode]:
        """The grad mode a context manager or decorator expression sets."""
        call_args: Sequence[cst.Arg] = ()
        target = expr
        if isinstance(expr, cst.Call):
            target, call_args = expr.func, expr.args
        name = self._names.qualified(target)
        if name not in GRAD_MODE_MANAGERS:
            # A project's own wrapper (`@smart_inference_mode()`,
            # `with inference_context():`): its name is all we can see.
            local = dotted(target)
            if local and NO_GRAD_WRAPPER_NAME.search(local.rsplit(".", 1)[-1]) and not (name or "").startswith("torch."):
                return Mode.MAYBE_DISABLED
            return None
        if name == "torch.no_grad":
            return Mode.DISABLED
        if name == "torch.enable_grad":
            return Mode.ENABLED
        flag = _literal_bool(call_args[0]) if call_args else None
        if name == "torch.inference_mode":
            return Mode.ENABLED if flag is False else Mode.DISABLED
        # torch.set_grad_enabled needs its argument.
        if flag is None:
            return Mode.MAYBE_DISABLED if call_args else None
        return Mode.DISABLED if not flag else Mode.ENABLED

    def is_disabled(self, node: cst.CSTNode) -> bool:
        """True when `node` runs (or may run) with gradient recording off."""
        mode = self.mode_at(node)
        return mode in (Mode.DISABLED, Mode.MAYBE_DISABLED)

    def mode_at(self, node: cst.CSTNode) -> Optional[Mode]:
        return self._mode_and_source(node)[0]

    def disabled_by(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        """The `with` statement, decorated function or `set_grad_enabled(False)`
        line that certainly turns autograd off at `node`; None otherwise."""
        mode, source = self._mode_and_source(node)
        return source if mode is Mode.DISABLED else None

    def _mode_and_source(self, node: cst.CSTNode) -> Tuple[Optional[Mode], Optional[cst.CSTNode]]:
        child = node
        for ancestor in self._index.ancestors(node):
            if type(ancestor) not in _MODE_SETTING:  # expressions and simple statements: skipped fast
                child = ancestor
                continue
            mode: Optional[Mode] = None
            source: Optional[cst.CSTNode] = ancestor
            if isinstance(ancestor, cst.With) and child is ancestor.body:
                mode = self._last_mode(item.item for item in ancestor.items)
            elif isinstance(ancestor, cst.FunctionDef) and child is ancestor.body:
                mode = self._last_mode(d.decorator for d in ancestor.decorators)
                if mode is None and ancestor in self._wrappers:
                    # Applied after the decorators, so only when none of them decides.
                    wrapper, source = self._wrappers[ancestor]
                    mode = self.mode_of(wrapper)
                if mode is None and self.called_only_when_disabled(ancestor):
                    mode = Mode.DISABLED
            elif isinstance(ancestor, cst.If) and child is ancestor.body:
                mode = self._tested_mode(ancestor.test)
            elif isinstance(ancestor, cst.If) and child is ancestor.orelse and isinstance(child, cst.Else):
                mode = _OPPOSITE.get(self._tested_mode(ancestor.test))
            elif isinstance(ancestor, (cst.IndentedBlock, cst.Module)) and self._statement_switches:
                mode, source = self._switch_before(ancestor, child)
            if mode is Mode.ENABLED and self._enters_inference(ancestor, child) is None:
                # `enable_grad()` inside `inference_mode()` records nothing:
                # tensors made there are inference tensors (torch >= 1.9).
                inference = self._inference_source(ancestor)
                if inference is not None:
                    return Mode.DISABLED, inference
            if mode is not None:
                return mode, source
            child = ancestor
        return None, None

    def _enters_inference(self, ancestor: cst.CSTNode, child: cst.CSTNode) -> Optional[bool]:
        """True when `ancestor` (a `with` or a decorated function holding
        `child`) enters inference mode, False when it leaves it
        (`inference_mode(False)`), None when it does neither."""
        if isinstance(ancestor, cst.With) and child is ancestor.body:
            exprs = [item.item for item in ancestor.items]
        elif isinstance(ancestor, cst.FunctionDef) and child is ancestor.body:
            exprs = self._mode_setters(ancestor)
        else:
            return None
        found = None
        for expr in exprs:
            target = expr.func if isinstance(expr, cst.Call) else expr
            if self._names.qualified(target) == "torch.inference_mode":
                found = self.mode_of(expr) is Mode.DISABLED
        return found

    def _inference_source(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        """The `with torch.inference_mode():` or decorated function that puts
        `node` in inference mode, also through every caller in the file."""
        child = node
        for ancestor in self._index.ancestors(node):
            entered = self._enters_inference(ancestor, child)
            if entered is not None:
                return ancestor if entered else None
            if isinstance(ancestor, cst.FunctionDef) and child is ancestor.body:
                return ancestor if self._called_only_in_inference(ancestor) else None
            child = ancestor
        return None

    def _called_only_in_inference(self, function: cst.FunctionDef) -> bool:
        if function in self._inference_cache:
            return self._inference_cache[function]
        self._inference_cache[function] = False  # recursion: decided by the other call sites
        sites = self.call_sites(function)
        result = bool(sites) and all(self._inference_source(site) is not None for site in sites)
        self._inference_cache[function] = result
        return result

    def function_setter(self, function: cst.FunctionDef) -> Optional[Tuple[cst.BaseExpression, cst.CSTNode]]:
        """What sets the mode `function`'s body runs in, by itself: (the
        manager's expression, where it is written: the `Decorator`, or the
        line rebinding the function to itself wrapped). The innermost
        decides; None when neither decorators nor a wrapper set one."""
        found = None
        if function in self._wrappers:
            found = self._wrappers[function]
        for decorator in function.decorators:
            if self.mode_of(decorator.decorator) is not None:
                found = (decorator.decorator, decorator)
        return found

    def _mode_setters(self, function: cst.FunctionDef) -> List[cst.BaseExpression]:
        """What may set the mode `function` runs in, outermost first (the
        last that sets one decides): a wrapper it is rebound to, then its
        decorators from the top down."""
        outer = [self._wrappers[function][0]] if function in self._wrappers else []
        return outer + [d.decorator for d in function.decorators]

    def _find_wrappers(self) -> Dict[cst.FunctionDef, Tuple[cst.BaseExpression, cst.CSTNode]]:
        """Functions rebound, in the block that defines them, to themselves
        wrapped in a grad-mode manager: `evaluate = torch.no_grad()(evaluate)`
        (module level) or `forward = torch.inference_mode()(forward)` (class
        body), the form of a decorator applied after the fact. Function ->
        (the manager's expression, the rebinding statement)."""
        found: Dict[cst.FunctionDef, Tuple[cst.BaseExpression, cst.CSTNode]] = {}
        for assign in self._index.nodes(cst.Assign):
            value = assign.value
            if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Call) and len(value.args) == 1):
                continue
            wrapped, targets = value.args[0].value, assign.targets
            if not (isinstance(wrapped, cst.Name) and len(targets) == 1 and isinstance(targets[0].target, cst.Name)):
                continue
            if targets[0].target.value != wrapped.value or self.mode_of(value.func) is None:
                continue
            line = self._index.parent(assign)
            block = self._index.parent(line) if line is not None else None
            statements = getattr(block, "body", ())
            if line not in statements:
                continue
            before = statements[: statements.index(line)]
            defined = [s for s in before if isinstance(s, cst.FunctionDef) and s.name.value == wrapped.value]
            if defined:
                found[defined[-1]] = (value.func, line)
        return found

    def _last_mode(self, exprs) -> Optional[Mode]:
        found = None
        for expr in exprs:
            mode = self.mode_of(expr)
            if mode is not None:
                found = mode
        return found

    def _tested_mode(self, test: cst.BaseExpression) -> Optional[Mode]:
        """The mode a branch on `test` runs in: `if torch.is_grad_enabled():`
        runs with autograd on, `if not torch.is_grad_enabled():` with it off."""
        negated = isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not)
        inner = test.expression if negated else test
        if not (isinstance(inner, cst.Call) and not inner.args and self._names.qualified(inner.func) == "torch.is_grad_enabled"):
            return None
        return Mode.DISABLED if negated else Mode.ENABLED

    def _guarded_mode(self, statement: cst.CSTNode) -> Optional[Mode]:
        """The mode a guard leaves for the statements after it: `if
        torch.is_grad_enabled(): raise ...` and `assert not
        torch.is_grad_enabled()` let only code under no_grad go on."""
        if isinstance(statement, cst.If) and statement.orelse is None:
            body = statement.body.body
            if len(body) == 1 and isinstance(body[0], cst.SimpleStatementLine) and isinstance(body[0].body[-1], cst.Raise):
                return _OPPOSITE.get(self._tested_mode(statement.test))
        if isinstance(statement, cst.SimpleStatementLine) and len(statement.body) == 1 and isinstance(statement.body[0], cst.Assert):
            return self._tested_mode(statement.body[0].test)
        return None

    def _find_statement_switches(self) -> Dict[cst.CSTNode, Mode]:
        """`torch.set_grad_enabled(False)` called as a statement of its own,
        and guards that stop unless autograd is in a given mode."""
        switches = {}
        for statement in self._index.nodes(cst.If):
            mode = self._guarded_mode(statement)
            if mode is not None:
                switches[statement] = mode
        for statement in self._index.nodes(cst.Assert):
            line = self._index.parent(statement)
            mode = self._guarded_mode(line) if line is not None else None
            if mode is not None:
                switches[line] = mode
        for line in self._index.nodes(cst.SimpleStatementLine):
            for statement in line.body:
                if isinstance(statement, cst.Expr) and isinstance(statement.value, cst.Call):
                    call = statement.value
                    if self._names.qualified(call.func) == "torch.set_grad_enabled":
                        mode = self.mode_of(call)
                        if mode is not None:
                            switches[line] = mode
        return switches

    def _switch_before(self, block: cst.CSTNode, child: cst.CSTNode) -> Tuple[Optional[Mode], Optional[cst.CSTNode]]:
        found: Tuple[Optional[Mode], Optional[cst.CSTNode]] = (None, None)
        for statement in block.body:  # type: ignore[attr-defined]
            if statement is child:
                break
            if statement in self._statement_switches:
                found = (self._statement_switches[statement], statement)
        return found

    # Callers in the same file -------------------------------------------

    @cached_property
    def _calls_by_name(self) -> Dict[Tuple[Optional[bool], str], List[cst.Call]]:
        """Calls `f(...)` under (False, "f"), `self.f(...)`/`cls.f(...)`
        under (True, "f") and `obj.f(...)` under (None, "f"): one pass,
        however many functions ask."""
        calls: Dict[Tuple[Optional[bool], str], List[cst.Call]] = {}
        for call in self._index.nodes(cst.Call):
            func = call.func
            if isinstance(func, cst.Name):
                calls.setdefault((False, func.value), []).append(call)
            elif isinstance(func, cst.Attribute) and self._index.is_receiver(func.value):
                calls.setdefault((True, func.attr.value), []).append(call)
            elif (
                isinstance(func, cst.Attribute)
                and not isinstance(func.value, cst.Call)
                and func.attr.value not in MODULE_API
                and self._names.qualified(func.value) is None
            ):
                calls.setdefault((None, func.attr.value), []).append(call)
        return calls

    @cached_property
    def _method_owners(self) -> Dict[str, set]:
        """Method name -> the classes of this file that define it."""
        owners: Dict[str, set] = {}
        for function in self._index.nodes(cst.FunctionDef):
            owner = self._owning_class(function)
            if owner is not None:
                owners.setdefault(function.name.value, set()).add(owner)
        return owners

    def call_sites(self, function: cst.FunctionDef) -> List[cst.Call]:
        name = function.name.value
        owner = self._owning_class(function)
        if owner is None:
            return [call for call in self._calls_by_name.get((False, name), ()) if not self.rebound_at(call, name)]
        sites = [call for call in self._calls_by_name.get((True, name), ()) if self._index.is_inside(call, owner)]
        if len(self._method_owners.get(name, ())) == 1:
            # `model.test_step(batch)` from another object: the one class of
            # the file with that method (as `intent.methods_called` resolves
            # it), unless the object comes from another module.
            sites += [
                call
                for call in self._calls_by_name.get((None, name), [])
                if not built_by_import(call.func.value, self._index, self._names)
            ]
        return sites

    def rebound_at(self, node: cst.CSTNode, name: str) -> bool:
        """Whether `name` at `node` (a call) is a parameter or a local variable
        of the calling function (`closure()` in an optimizer's `step(self,
        closure)`), not the function of that name defined elsewhere."""
        caller = self._index.enclosing(node, cst.FunctionDef)
        if caller is None:
            return False
        params = caller.params
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        every += [p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]
        if any(param.name.value == name for param in every):
            return True
        for assign in self._index.descendants(caller.body, cst.Assign):
            if self._index.scope_of(assign) is caller and any(
                isinstance(target.target, cst.Name) and target.target.value == name for target in assign.targets
            ):
                return True
        return False

    def _owning_class(self, function: cst.FunctionDef) -> Optional[cst.ClassDef]:
        parent = self._index.parent(function)
        grandparent = self._index.parent(parent) if parent is not None else None
        return grandparent if isinstance(grandparent, cst.ClassDef) else None

    def callers_elsewhere(self, function: cst.FunctionDef) -> Sequence["ExternalCall"]:
        """The calls of a top-level `function`, or of a method of a top-level
        class, that other files of the run make, as far as they can change
        its mode (`project.incoming`)."""
        if not self._elsewhere:
            return ()
        parent = self._index.parent(function)
        if parent is self._index.module:
            return self._elsewhere.get(function.name.value, ())
        owner = self._owning_class(function)
        if owner is not None and self._index.parent(owner) is self._index.module:
            return self._elsewhere.get(f"{owner.name.value}.{function.name.value}", ())
        return ()

    def disabled_elsewhere(self, function: cst.FunctionDef) -> Optional["ExternalCall"]:
        """A call of `function` in another file that certainly runs with
        autograd off and that no `if` decides; None when there is none."""
        return next((c for c in self.callers_elsewhere(function) if c.mode == Mode.DISABLED.value and not c.branched), None)

    def called_here_only_when_disabled(self, function: cst.FunctionDef, vacuous: bool = False) -> bool:
        """Whether every call of `function` in this file runs with autograd
        off; with no such call, `vacuous`."""
        sites = self.call_sites(function)
        return all(self.is_disabled(site) for site in sites) if sites else vacuous

    def called_only_when_disabled(self, function: cst.FunctionDef) -> bool:
        if function in self._callers_cache:
            return self._callers_cache[function]
        if function in self._in_progress:
            return False  # recursion: decided by the other call sites
        self._in_progress.add(function)
        try:
            elsewhere = self.callers_elsewhere(function)
            result = self.called_here_only_when_disabled(function, bool(elsewhere))
            result = result and all(call.disabled for call in elsewhere)
        finally:
            self._in_progress.discard(function)
        self._callers_cache[function] = result
        return result
