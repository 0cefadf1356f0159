"""Values that module hooks keep on an object with their graph cut.

A forward hook `hook(module, input, output)` that stores `output.detach()`
on an object (`self.features = output.detach()`,
`self._data[name].append(output.detach())`) keeps the layer's activation
without its graph: whatever is later computed from what it stored carries
no gradient back to the layer or to anything before it. The hook may be a
function, a nested `def`, a bound method (`self._hook`), a callable
instance (`self.recorder` of a class with `__call__`) or a
`functools.partial` of one of those. A backward hook storing
`grad_output[0].detach()` keeps a gradient: plain data, no cut.

`HookCaptures.captured(attribute_read)` answers, for `self.features`,
`probe.features` or a `@property` returning such an attribute, the captures
every store of that attribute makes: only when the class stores nothing else
there (resets to `None`, `[]`, `{}` or `defaultdict(list)` aside).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional

import libcst as cst

from detachlint.analysis.names import all_params, dotted
from detachlint.analysis.vocabulary import COPYING_METHODS, STORING_METHODS

if TYPE_CHECKING:  # pragma: no cover
    from detachlint.analysis.values import ValueFacts

_FORWARD_HOOKS = {"register_forward_hook"}
_BACKWARD_HOOKS = {"register_full_backward_hook", "register_backward_hook"}
_EMPTY_CONTAINERS = {"list", "dict", "set", "tuple", "collections.defaultdict", "collections.OrderedDict", "defaultdict", "OrderedDict"}


@dataclass(frozen=True)
class Capture:
    """A hook's store of its module's output (or gradient), detached, on an object."""

    klass: cst.ClassDef  # the class whose instance keeps it
    attribute: str  # `features` for `self.features = output.detach()`
    hook: cst.FunctionDef
    cut: cst.Call  # `output.detach()`
    registration: cst.Call  # `layer.register_forward_hook(...)`
    forward: bool  # a forward hook's output; else a backward hook's gradient

    @property
    def hooked(self) -> cst.BaseExpression:
        """`layer` of `layer.register_forward_hook(...)`."""
        return self.registration.func.value  # type: ignore[attr-defined]


class HookCaptures:
    def __init__(self, values: "ValueFacts") -> None:
        self.values = values
        self.index = values.index
        self.names = values.names

    @cached_property
    def captures(self) -> List[Capture]:
        """Every detached store of a hook's output or gradient on `self` in a class of the file."""
        found: List[Capture] = []
        for call in self.index.nodes(cst.Call):
            func = call.func
            if not isinstance(func, cst.Attribute) or not call.args:
                continue
            method = func.attr.value
            if method not in _FORWARD_HOOKS | _BACKWARD_HOOKS:
                continue
            with_kwargs = any(a.keyword is not None and a.keyword.value == "with_kwargs" and dotted(a.value) == "True" for a in call.args)
            position = 3 if with_kwargs else 2
            for hook in self._hooks_given(call.args[0].value):
                params = list(all_params(hook.params))
                if self.index.is_method(hook):
                    params = params[1:]  # `self`
                if len(params) <= position or params[position].star:
                    continue
                klass = self.index.enclosing(hook, cst.ClassDef)
                if klass is None:
                    continue
                for attribute, cut in self._detached_stores(hook, params[position].name.value):
                    found.append(Capture(klass, attribute, hook, cut, call, method in _FORWARD_HOOKS))
        return found

    def captured(self, read: cst.BaseExpression, depth: int = 0) -> List[Capture]:
        """The captures an attribute read gives back: `self.x` or `obj.x`
        where every store of `x` in the class is one, or a `@property`
        returning such an attribute. Empty when anything else may be there."""
        if not isinstance(read, cst.Attribute) or depth > 2:
            return []
        klass = self._class_of_object(read.value)
        if klass is None:
            return []
        name = read.attr.value
        kept = self._kept_attributes(klass).get(name)
        if kept:
            return kept
        prop = self._property(klass, name)
        if prop is None:
            return []
        found: List[Capture] = []
        returns = [r for r in self.index.descendants(prop.body, cst.Return) if self.index.scope_of(r) is prop]
        for returned in returns:
            inner = self.captured(returned.value, depth + 1) if returned.value is not None else []
            if not inner:
                return []
            found += inner
        return found

    # Hooks and their stores ------------------------------------------------

    def _hooks_given(self, expr: cst.BaseExpression) -> List[cst.FunctionDef]:
        """The file functions a hook argument runs: a function, a method,
        the `__call__` of an instance, through `functools.partial`."""
        if isinstance(expr, cst.Call):
            if self.names.qualified(expr.func) == "functools.partial" and expr.args and expr.args[0].keyword is None:
                return self._hooks_given(expr.args[0].value)
            return self.values._functions_given(expr)
        functions = self.values._functions_given(expr)
        if functions:
            return functions
        klass = self.values.across_calls.instance_class(expr)
        call = self.values.across_calls.method(klass, "__call__") if klass is not None else None
        return [call] if call is not None else []

    def _detached_stores(self, hook: cst.FunctionDef, param: str) -> Iterator[tuple]:
        """(attribute, the cut) for each store of `param` detached on `self` in `hook`."""
        for assign in self.index.descendants(hook.body, cst.Assign):
            cut = _detached_read_of(assign.value, param)
            if cut is None:
                continue
            for target in assign.targets:
                attribute = _self_attribute(target.target, self.index)
                if attribute is not None:
                    yield attribute, cut
        for call in self.index.descendants(hook.body, cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in STORING_METHODS and call.args:
                cut = _detached_read_of(call.args[-1].value, param)
                attribute = _self_attribute(func.value, self.index)
                if cut is not None and attribute is not None:
                    yield attribute, cut

    def _kept_attributes(self, klass: cst.ClassDef) -> Dict[str, List[Capture]]:
        """attribute -> its captures, for the attributes of `klass` where
        every store is a capture or a reset to an empty value."""
        cache = self.__dict__.setdefault("_kept", {})
        if klass not in cache:
            mine = [c for c in self.captures if c.klass is klass]
            captured_cuts = {c.cut for c in mine}
            kept: Dict[str, List[Capture]] = {}
            for capture in mine:
                kept.setdefault(capture.attribute, []).append(capture)
            for attribute, stored in self._stores(klass):
                if attribute in kept and stored not in captured_cuts and not self._empty(stored):
                    del kept[attribute]
            cache[klass] = kept
        return cache[klass]

    def _stores(self, klass: cst.ClassDef) -> Iterator[tuple]:
        """(attribute, value) for every store on `self.x` in `klass`: assignments,
        `self.x[k] = v`, `self.x.append(v)`; the value is None when unknown."""
        for assign in self.index.descendants(klass, cst.Assign):
            for target in assign.targets:
                attribute = _self_attribute(target.target, self.index)
                if attribute is not None:
                    yield attribute, _detached_within(assign.value)
        for node in self.index.descendants(klass, cst.AugAssign):
            attribute = _self_attribute(node.target, self.index)
            if attribute is not None:
                yield attribute, None
        for call in self.index.descendants(klass, cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in STORING_METHODS:
                attribute = _self_attribute(func.value, self.index)
                if attribute is not None:
                    yield attribute, _detached_within(call.args[-1].value) if call.args else None

    def _empty(self, value: Optional[cst.BaseExpression]) -> bool:
        """`None`, `[]`, `{}`, `dict()`, `defaultdict(list)`: a reset."""
        if isinstance(value, cst.Name):
            return value.value == "None"
        if isinstance(value, (cst.List, cst.Dict, cst.Tuple)):
            return not value.elements
        if isinstance(value, cst.Call):
            name = self.names.qualified(value.func) or dotted(value.func) or ""
            return name in _EMPTY_CONTAINERS and all(dotted(a.value) in ("list", "dict") for a in value.args)
        return False

    # Objects and classes ---------------------------------------------------

    def _class_of_object(self, expr: cst.BaseExpression) -> Optional[cst.ClassDef]:
        if self.index.is_receiver(expr):
            return self.index.enclosing(expr, cst.ClassDef)
        return self.values.across_calls.instance_class(expr)

    def _property(self, klass: cst.ClassDef, name: str) -> Optional[cst.FunctionDef]:
        method = self.values.across_calls.method(klass, name)
        if method is None or not any(dotted(d.decorator) == "property" for d in method.decorators):
            return None
        return method


def _self_attribute(target: cst.BaseExpression, index) -> Optional[str]:
    """`x` for `self.x`, `self.x[k]`, `self.x[k][j]`."""
    while isinstance(target, cst.Subscript):
        target = target.value
    if isinstance(target, cst.Attribute) and index.is_receiver(target.value):
        return target.attr.value
    return None


def _detached_read_of(value: cst.BaseExpression, param: str) -> Optional[cst.Call]:
    """The `.detach()` call when `value` is `param` (or an element of it)
    detached: `output.detach()`, `output.clone().detach()`, `grad_output[0].detach().cpu()`."""
    cut = None
    node = value
    while True:
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and not node.args and node.func.attr.value == "detach":
            cut = cut or node
            node = node.func.value
        elif isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value in COPYING_METHODS:
            node = node.func.value
        elif isinstance(node, cst.Subscript):
            node = node.value  # `grad_output[0]`: an element of it
        else:
            break
    return cut if isinstance(node, cst.Name) and node.value == param else None


def _detached_within(value: cst.BaseExpression) -> cst.BaseExpression:
    """The `.detach()` call a stored value ends in (to match a capture), else the value."""
    node = value
    while isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
        if node.func.attr.value == "detach" and not node.args:
            return node
        if node.func.attr.value not in COPYING_METHODS:
            break
        node = node.func.value
    return value
