"""Facts about values, followed across the file's calls.

`AcrossCalls.without_graph(expr)` is True only when every input of `expr` is
known to carry no graph: `.detach()`, `.data`, `.item()`, numbers, torch
factories without `requires_grad=True`, and what torch operations, Python
builtins (`sum`, `max`) and containers make of those alone. Unknown is
False. Names are followed to every assignment that may reach them; a
parameter to what every call of the file passes for it (or its default);
a container (`losses = {}`, `dict()`, a comprehension) to everything stored
in it; a call to the returns of the function it runs, also for a method or
a `forward` called on an object whose class the file builds
(`head.loss(...)` with `head = Head()` passed in, `self.model.loss(...)`
with `self.model = model` given `Trainer(GFLHead())`).

`instance_class(expr)` is that last fact on its own: the class of this file
an object expression is an instance of, from the calls that build it;
`callees(call)` the functions a call runs through it (and the nested
`def` a decorator-like function returns: `jfoo = jit(foo); jfoo(x)`).

`without_graph_on_branch(expr)`: the `if`/`else` block on whose path every
term of `expr` is a constant tensor (`loss_bbox = torch.tensor(0.)` when a
batch has no positive sample), though other paths keep a graph.

`cut_by_hook_captures(expr)`: the forward hooks' detached captures
(`analysis/hook_captures.py`) without which `expr` would keep a graph: a
loss term built from what a hook stored with `output.detach()`. Taken as
cut, they are followed like any graph-free value, and a returned
`a if flag else b` takes the branch the call's literal `flag` picks.
An object bound by `with Cls(...) as obj:` is an instance of `Cls` when its
`__enter__` returns `self`.

`holds(expr)`: what `values.holds` says, and where it knows nothing, what
the calls tell: a parameter holds what every call passes for it, a dict
entry (`info["means2d"]`) what the literal that reaches it holds there, an
element of `*args` what the calls pass past the named parameters.

`flagged_params(function)` / `flagged_arguments(call)`: the parameters a
helper sets `requires_grad` on (directly, on the elements of `*items`,
through a generator over them, or by handing them on), and the arguments
of a call that land there.

A result of torch does not require grad exactly when none of its inputs
does (torch 2.x); index arguments (`scatter_(dim, index, src)`,
`gather(dim, index)`, the mask of `masked_fill`) never do, being integer or
boolean tensors.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Dict, FrozenSet, Iterator, List, Optional, Set, Tuple

import libcst as cst

from detachlint.analysis.hook_captures import Capture, HookCaptures
from detachlint.analysis.names import all_params, dotted, string_key, target_names, unpacked_position
from detachlint.analysis.values import GRAD, Holds, returns_indices_at
from detachlint.analysis.vocabulary import (
    DETACHING_METHODS,
    FACTORIES,
    GRAPH_CUTTING_ATTRIBUTES,
    NO_GRAPH_METHODS,
    QUALIFIED_PYTHON_NUMBER_BUILTINS,
    READING_METHODS,
    SIZE_METHODS,
    STORING_METHODS,
    TO_PYTHON_METHODS,
)

if TYPE_CHECKING:  # pragma: no cover
    from detachlint.analysis.values import ValueFacts

# Methods whose result is no tensor in the graph: detached values, Python numbers, sizes.
_NO_GRAPH_RESULTS = DETACHING_METHODS | TO_PYTHON_METHODS | SIZE_METHODS
# Attributes with no graph. Not `.grad`: after `backward(create_graph=True)` it has one.
_CUT_ATTRIBUTES = GRAPH_CUTTING_ATTRIBUTES - {"grad"}
# Builtins whose result is made of their arguments only.
_COMBINING_BUILTINS = {"sum", "max", "min", "abs", "list", "tuple", "sorted", "reversed", "dict", "zip", "enumerate"}
_CONSTANTS = {"True", "False", "None"}
# Positions (after the receiver) of index and mask arguments: integer or
# boolean tensors, which never require grad.
_INDEX_POSITIONS = {
    **dict.fromkeys(
        ("scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_reduce", "scatter_reduce_", "gather",
         "index_select", "index_fill", "index_fill_", "index_add", "index_add_", "index_copy", "index_copy_"),
        1,
    ),
    **dict.fromkeys(("masked_fill", "masked_fill_", "masked_scatter", "masked_scatter_", "masked_select"), 0),
}
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
_CONTAINERS = (cst.List, cst.Tuple, cst.Dict, cst.Set) + _COMPREHENSIONS
_MAX_DEPTH = 40
_MAX_BLOCKS = 16


class AcrossCalls:
    """Facts followed across the file's calls: graph-free values, what a
    tensor holds, the classes of objects."""

    def __init__(self, values: "ValueFacts") -> None:
        self.values = values
        self.index = values.index
        self.names = values.names
        self.intent = values.intent
        classes: Dict[str, List[cst.ClassDef]] = {}
        for klass in self.index.nodes(cst.ClassDef):
            classes.setdefault(klass.name.value, []).append(klass)
        # A class name defined twice is not one class.
        self._classes = {name: found[0] for name, found in classes.items() if len(found) == 1}
        self._free: Dict[Tuple[cst.CSTNode, Optional[cst.CSTNode]], bool] = {}
        self._instances: Dict[cst.CSTNode, Optional[cst.ClassDef]] = {}
        self._held: Dict[cst.CSTNode, Holds] = {}
        self._flags: Dict[cst.FunctionDef, Dict[str, bool]] = {}
        self._busy: Set[cst.CSTNode] = set()
        self._depth = 0
        self._sites: Dict[cst.FunctionDef, List[cst.Call]] = {}
        self._calls_by_attr: Optional[Dict[str, List[cst.Call]]] = None
        self._plain_calls: Optional[List[cst.Call]] = None
        self._closures: Dict[cst.Call, List[cst.FunctionDef]] = {}
        self._stored: Dict[cst.ClassDef, Dict[str, List[cst.BaseExpression]]] = {}
        # The `if`/`else` block whose path `without_graph_on_branch` follows.
        self._assumed: Optional[cst.CSTNode] = None
        # Hook captures `without_graph` takes as cut (see `cut_by_hook_captures`).
        self._cut_captures: FrozenSet = frozenset()
        self._blocks: Optional[List[cst.CSTNode]] = None

    # Classes of objects ----------------------------------------------------

    def instance_class(self, expr: cst.BaseExpression) -> Optional[cst.ClassDef]:
        """The class of this file `expr` is an instance of, when every
        binding that reaches it builds one: `Head(...)`, a name bound to
        that, a parameter every call passes one to, `self.model` stored
        from such a value in the class."""
        if expr in self._instances:
            return self._instances[expr]
        if expr in self._busy or self._depth > _MAX_DEPTH:
            return None
        self._busy.add(expr)
        self._depth += 1
        try:
            found = self._instance_class(expr)
        finally:
            self._busy.discard(expr)
            self._depth -= 1
        self._instances[expr] = found
        return found

    def _instance_class(self, expr: cst.BaseExpression) -> Optional[cst.ClassDef]:
        if isinstance(expr, cst.Call):
            name = dotted(expr.func)
            return self._classes.get(name) if name is not None else None
        if isinstance(expr, cst.Name):
            if self.index.is_receiver(expr):
                return None
            entered = self._entered_with(expr)
            if entered is not None:
                return entered
            return self._same_class(self._reaching_values(expr))
        if isinstance(expr, cst.Attribute):
            return self._same_class(self.stored_on_self(expr))
        return None

    def _entered_with(self, read: cst.Name) -> Optional[cst.ClassDef]:
        """The class of `obj` read inside `with Cls(...) as obj:` when that
        class's `__enter__` returns `self`."""
        for ancestor in self.index.ancestors(read):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                return None
            if not isinstance(ancestor, cst.With) or not self.index.is_inside(read, ancestor.body):
                continue
            for item in ancestor.items:
                if item.asname is not None and isinstance(item.asname.name, cst.Name) and item.asname.name.value == read.value:
                    klass = self.instance_class(item.item)
                    enter = self.method(klass, "__enter__") if klass is not None else None
                    returns = [r.value for r in self.index.descendants(enter.body, cst.Return)] if enter is not None else []
                    if returns and all(self.index.is_receiver(r) for r in returns):
                        return klass
                    return None
        return None

    def stored_on_self(self, expr: cst.BaseExpression) -> List[cst.BaseExpression]:
        """The values the class around `self.x` assigns to `self.x`, in any method."""
        if not (isinstance(expr, cst.Attribute) and self.index.is_receiver(expr.value)):
            return []
        klass = self.index.enclosing(expr, cst.ClassDef)
        if klass is None:
            return []
        if klass not in self._stored:
            stored: Dict[str, List[cst.BaseExpression]] = {}
            for assign in self.index.descendants(klass, cst.Assign):
                for target in assign.targets:
                    t = target.target
                    if isinstance(t, cst.Attribute) and self.index.is_receiver(t.value):
                        stored.setdefault(t.attr.value, []).append(assign.value)
            self._stored[klass] = stored
        return self._stored[klass].get(expr.attr.value, [])

    def _same_class(self, exprs: Optional[List[cst.BaseExpression]]) -> Optional[cst.ClassDef]:
        if not exprs:
            return None
        classes = {self.instance_class(e) for e in exprs}
        return classes.pop() if len(classes) == 1 else None

    def _reaching_values(self, read: cst.Name) -> Optional[List[cst.BaseExpression]]:
        """The values that may reach `read`: of its assignments, or what the
        calls pass for it when it is a parameter. None when unknown."""
        scope_node = self.index.scope_of(read)
        while True:
            scope = self.values.scope(scope_node)
            reaching = scope.reaching(read) if scope_node is self.index.scope_of(read) else self._last_binding(scope, read.value)
            if reaching:
                if any(value is None or not isinstance(binding, (cst.Assign, cst.AnnAssign)) for binding, value in reaching):
                    return None
                if any(unpacked_position(binding, read.value, from_one_value=True) for binding, _ in reaching):
                    return None
                return [value for _, value in reaching]
            if read.value in scope.params:
                return self._passed_for(scope_node, read.value)
            if scope_node is self.index.module or isinstance(scope_node, cst.Lambda):
                return None
            scope_node = self.index.scope_of(scope_node)

    def _last_binding(self, scope, name: str):
        """An enclosing scope's bindings of `name`: only one, to be certain."""
        entries = scope.assignments.get(name, [])
        return [(e[1], e[2]) for e in entries] if len(entries) == 1 else []

    def _passed_for(self, function: cst.CSTNode, name: str) -> Optional[List[cst.BaseExpression]]:
        """What every call of `function` passes for its parameter `name`
        (its default where a call passes none)."""
        if not isinstance(function, cst.FunctionDef) or name == self.index.instance_param(function):
            return None
        param = next((p for p in all_params(function.params) if p.name.value == name), None)
        if param is None or param.star in ("*", "**"):
            return None
        sites = self.call_sites(function)
        if not sites:
            return None
        found = []
        for call in sites:
            if any(arg.star for arg in call.args):
                return None  # `f(*args)`: what lands where is unknown
            bound = self.intent.bound_arguments(call, function)
            if name not in bound:
                return None
            found.append(bound[name])
        return found

    def call_sites(self, function: cst.FunctionDef) -> List[cst.Call]:
        """The calls of the file that run `function`: those the value facts
        know, constructor calls for `__init__`, and `obj.method(...)` or
        `obj(...)` on an object of its class."""
        if function in self._sites:
            return self._sites[function]
        self._sites[function] = []  # a call reached while resolving is not counted twice
        found = list(self.values.call_sites(function))
        if isinstance(self.index.scope_of(function), cst.FunctionDef):
            # A closure: called through the name its maker's result is bound to.
            found += [
                c for c in self._name_calls() if c not in found and function in self._closure_callees(c)
            ]
        klass = self.index.enclosing(function, cst.ClassDef)
        if klass is not None and self.index.parent(self.index.parent(function)) is klass:
            name = function.name.value
            if name == "__init__":
                found += [c for c in self.index.nodes(cst.Call) if dotted(c.func) == klass.name.value]
            elif not name.startswith("__") or name == "__call__":
                for call in self._calls_by_attribute().get(name, ()):
                    receiver = call.func.value if isinstance(call.func, cst.Attribute) else None
                    if receiver is not None and call not in found and self.instance_class(receiver) is klass:
                        found.append(call)
        self._sites[function] = found
        return found

    def _name_calls(self) -> List[cst.Call]:
        """Calls of a plain name that the file binds by assignment, not by `def`."""
        if self._plain_calls is None:
            self._plain_calls = [
                c for c in self.index.nodes(cst.Call)
                if isinstance(c.func, cst.Name) and not self.values.defines(c.func.value)
                and c.func.value in self.values.scope(c).assignments
            ]
        return self._plain_calls

    def _closure_callees(self, call: cst.Call) -> List[cst.FunctionDef]:
        if call not in self._closures:
            made = self._reaching_values(call.func) if isinstance(call.func, cst.Name) else None
            self._closures[call] = []
            if made and len(made) == 1 and isinstance(made[0], cst.Call):
                self._closures[call] = self._closures_returned(made[0])
        return self._closures[call]

    def _calls_by_attribute(self) -> Dict[str, List[cst.Call]]:
        if self._calls_by_attr is None:
            self._calls_by_attr = {}
            for call in self.index.nodes(cst.Call):
                func = call.func
                if isinstance(func, cst.Attribute) and not self.index.is_receiver(func.value):
                    self._calls_by_attr.setdefault(func.attr.value, []).append(call)
        return self._calls_by_attr

    def callees(self, call: cst.Call) -> List[cst.FunctionDef]:
        """The functions of this file `call` runs: as `values.file_functions`
        resolves them, else a method (or the `forward` / `__call__`) of the
        class of the object called."""
        direct = self.values.file_functions(call)
        if direct:
            return direct
        forward = self.values.forward_called(call)
        if forward is not None:
            return [forward]
        func = call.func
        if isinstance(func, cst.Attribute):
            klass = self.instance_class(func.value)
            if klass is not None:
                method = self.method(klass, func.attr.value)
                if method is not None:
                    return [method]
        klass = self.instance_class(func)
        if klass is not None:
            method = self.method(klass, "__call__") or self.method(klass, "forward")
            if method is not None:
                return [method]
        if isinstance(func, cst.Name):
            made = self._reaching_values(func)
            if made and len(made) == 1 and isinstance(made[0], cst.Call):
                return self._closures_returned(made[0])  # `jfoo = jit(foo); jfoo(x)` runs `wrapped`
        return []

    def _closures_returned(self, call: cst.Call) -> List[cst.FunctionDef]:
        """The nested `def` that the file function `call` runs returns by name
        (`def jit(fn): def wrapped(*args): ...; return wrapped`)."""
        makers = self.values.file_functions(call)
        if len(makers) != 1:
            return []
        maker = makers[0]
        nested = {
            f.name.value: f for f in self.index.descendants(maker.body, cst.FunctionDef) if self.index.scope_of(f) is maker
        }
        found = {
            nested[r.value.value] for r in self.index.descendants(maker.body, cst.Return)
            if self.index.scope_of(r) is maker and isinstance(r.value, cst.Name) and r.value.value in nested
        }
        return list(found) if len(found) == 1 else []

    def method(self, klass: cst.ClassDef, name: str) -> Optional[cst.FunctionDef]:
        """The method `name` of `klass` or of the first file class it inherits from that defines it."""
        for owner in self.intent.class_chain(klass):
            for statement in owner.body.body:
                if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
                    return statement
        return None

    # What tensors hold -----------------------------------------------------

    def holds(self, expr: cst.BaseExpression) -> Holds:
        """What `expr` holds: `values.holds(expr)`, and where that knows
        nothing, what the file's calls say: a parameter holds what every
        call passes for it (its default where one passes none), a name
        unpacked from a call what the function returns there,
        `info["means2d"]` what the dict literal that reaches `info` holds
        under that key, `self.splats["means"]` a parameter of a
        `ParameterDict`. NOTHING when any of those is unknown."""
        if self._parameter_entry(expr):
            return Holds.PARAM  # `values.holds` sees a module there: `ParameterDict` is one
        known = self.values.holds(expr)
        if known:
            return known
        if expr in self._held:
            return self._held[expr]
        if expr in self._busy or self._depth > _MAX_DEPTH:
            return Holds.NOTHING
        self._busy.add(expr)
        self._depth += 1
        try:
            found = self._holds(expr)
        finally:
            self._busy.discard(expr)
            self._depth -= 1
        self._held[expr] = found
        return found

    def _holds(self, expr: cst.BaseExpression) -> Holds:
        if isinstance(expr, cst.Name):
            if self.index.is_receiver(expr):
                return Holds.NOTHING
            loop = self._comprehension_loop(expr)
            if loop is not None:
                return self._element_holds(expr, loop)
            return _all_known([self._bound_holds(expr.value, b, v) for b, v in self._bindings(expr)])
        if isinstance(expr, cst.BinaryOperation):
            return _combined(self.holds(expr.left), self.holds(expr.right))
        if isinstance(expr, cst.UnaryOperation):
            return self.holds(expr.expression) & (GRAD | Holds.DETACHED)
        if isinstance(expr, cst.Subscript):
            key = string_key(expr)
            if key is not None:
                dicts = self._dicts(expr.value)
                if dicts:
                    return _all_known([self._held_under(d, key) for d in dicts])
            if self._parameter_container(expr.value):
                return Holds.PARAM  # `self.splats["means"]`: the Parameter itself
            inner = self.holds(expr.value)
            return Holds.ACTIVATION if inner & (Holds.PARAM | Holds.LEAF) else inner & (GRAD | Holds.DETACHED)
        if isinstance(expr, cst.Call):
            func = expr.func
            qualified = self.names.qualified(func)
            if qualified is None and isinstance(func, cst.Attribute) and not self.callees(expr):
                receiver = self.holds(func.value)
                if func.attr.value in NO_GRAPH_METHODS:
                    return Holds.DETACHED if receiver & (GRAD | Holds.DETACHED) else Holds.NOTHING
                return Holds.ACTIVATION if receiver & GRAD else receiver & Holds.DETACHED
            if qualified is not None:
                if not qualified.startswith("torch.") or qualified.rsplit(".", 1)[-1] in FACTORIES:
                    return Holds.NOTHING
                args = [self.holds(arg.value) for arg in expr.args if arg.keyword is None]
                return Holds.ACTIVATION if any(a & GRAD for a in args) else Holds.NOTHING
            callees = self.callees(expr)
            if len(callees) == 1:
                return self._returned_holds(callees[0], None)
        return Holds.NOTHING

    def _element_holds(self, target: cst.Name, loop: cst.CompFor) -> Holds:
        """What a comprehension's target `target` takes from what `loop`
        iterates: an element of it (`a` in `for a in args`, `for i, a in
        enumerate(args)`)."""
        iterable = loop.iter
        if isinstance(iterable, cst.Call) and dotted(iterable.func) == "enumerate" and len(iterable.args) == 1:
            names = loop.target.elements if isinstance(loop.target, cst.Tuple) else ()
            if len(names) != 2 or not (isinstance(names[1].value, cst.Name) and names[1].value.value == target.value):
                return Holds.NOTHING
            iterable = iterable.args[0].value
        elif not (isinstance(loop.target, cst.Name) and loop.target.value == target.value):
            return Holds.NOTHING
        return _all_known([self.holds(e) for e in self._elements(iterable)])

    def _elements(self, container: cst.BaseExpression) -> List[cst.BaseExpression]:
        """The elements of a list or tuple literal, or of a `*args` parameter
        (what every call of the file passes past the named parameters)."""
        if isinstance(container, (cst.List, cst.Tuple)):
            return [e.value for e in container.elements if not isinstance(e, cst.StarredElement)]
        if not isinstance(container, cst.Name):
            return []
        function = self.index.scope_of(container)
        star = function.params.star_arg if isinstance(function, cst.FunctionDef) else None
        if not isinstance(star, cst.Param) or star.name.value != container.value:
            return []
        if self.values.scope(function).reaching(container):
            return []
        found: List[cst.BaseExpression] = []
        for call in self.call_sites(function):
            passed = [a for a in call.args[len(self._positional(function)):] if a.keyword is None]
            if not passed or any(a.star for a in passed):
                return []
            found += [a.value for a in passed]
        return found

    def _bindings(self, read: cst.Name) -> List[Tuple[Optional[cst.CSTNode], Optional[cst.BaseExpression]]]:
        """(binding, value) that may reach `read`; (None, argument) for what
        the calls pass when it is a parameter; empty when unknown."""
        scope_node = self.index.scope_of(read)
        scope = self.values.scope(scope_node)
        reaching = scope.reaching(read)
        if reaching:
            return reaching + scope.loop_carried(read)
        if read.value in scope.params:
            return [(None, value) for value in self._passed_for(scope_node, read.value) or ()]
        return []

    def _bound_holds(self, name: str, binding: Optional[cst.CSTNode], value: Optional[cst.BaseExpression]) -> Holds:
        if value is None or isinstance(binding, (cst.For, cst.AugAssign)):
            return Holds.NOTHING
        position = unpacked_position(binding, name, from_one_value=True) if binding is not None else None
        if isinstance(value, cst.Call):
            callees = self.callees(value)
            if callees:
                return self._returned_holds(callees[0], position) if len(callees) == 1 else Holds.NOTHING
        if position is not None:
            return Holds.NOTHING
        return self.holds(value)

    def _returned_holds(self, function: cst.FunctionDef, position: Optional[int]) -> Holds:
        """What every return of `function` holds (at `position` of a returned tuple)."""
        found = []
        for value in self._returned(function, position):
            if isinstance(value, cst.Call) and position is not None and self.callees(value):
                callees = self.callees(value)
                found.append(self._returned_holds(callees[0], position) if len(callees) == 1 else Holds.NOTHING)
            else:
                found.append(self.holds(value) if value is not None else Holds.NOTHING)
        return _all_known(found)

    def _returned(self, function: cst.FunctionDef, position: Optional[int]) -> List[Optional[cst.BaseExpression]]:
        """The values `function` returns (their element at `position`);
        None for one that cannot be told, a call left whole for its callee."""
        returns = [r for r in self.index.descendants(function.body, cst.Return) if self.index.scope_of(r) is function]
        if any(self.index.scope_of(y) is function for y in self.index.descendants(function.body, cst.Yield)):
            return [None]
        found: List[Optional[cst.BaseExpression]] = []
        for returned in returns:
            value = returned.value
            if position is not None and isinstance(value, cst.Tuple):
                value = value.elements[position].value if position < len(value.elements) else None
            elif position is not None and not isinstance(value, cst.Call):
                value = None
            found.append(value)
        return found or [None]

    def _dicts(self, expr: cst.BaseExpression, position: Optional[int] = None) -> Optional[List[cst.Dict]]:
        """The dict literals `expr` may evaluate to; None when anything else may reach it."""
        if isinstance(expr, cst.Dict) and position is None:
            return [expr]
        if expr in self._busy or self._depth > _MAX_DEPTH:
            return None
        self._busy.add(expr)
        self._depth += 1
        try:
            sources: List[Tuple[Optional[cst.BaseExpression], Optional[int]]] = []
            if isinstance(expr, cst.Name) and position is None:
                bindings = self._bindings(expr)
                if not bindings:
                    return None
                for binding, value in bindings:
                    if value is None or isinstance(binding, (cst.For, cst.AugAssign)):
                        return None
                    sources.append((value, unpacked_position(binding, expr.value, from_one_value=True) if binding is not None else None))
            elif isinstance(expr, cst.Call):
                callees = self.callees(expr)
                if len(callees) != 1:
                    return None
                sources = [(value, position) for value in self._returned(callees[0], position)]
                sources = [(v, p if isinstance(v, cst.Call) else None) for v, p in sources]
            else:
                return None
            found: List[cst.Dict] = []
            for value, at in sources:
                dicts = self._dicts(value, at) if value is not None else None
                if dicts is None:
                    return None
                found += dicts
            return found
        finally:
            self._busy.discard(expr)
            self._depth -= 1

    def _held_under(self, literal: cst.Dict, key: str) -> Holds:
        for element in literal.elements:
            if isinstance(element, cst.DictElement) and isinstance(element.key, cst.SimpleString) and element.key.evaluated_value == key:
                return self.holds(element.value)
        return Holds.NOTHING

    def _parameter_container(self, expr: cst.BaseExpression) -> bool:
        """`self.splats` stored from `nn.ParameterDict(...)` or `nn.ParameterList(...)`."""
        if isinstance(expr, cst.Attribute):
            stored = self.stored_on_self(expr)
        elif isinstance(expr, cst.Name):
            stored = [value for _, value in self._bindings(expr)]
        else:
            stored = []
        return len(stored) == 1 and isinstance(stored[0], cst.Call) and (self.names.qualified(stored[0].func) or "") in (
            "torch.nn.ParameterDict", "torch.nn.ParameterList"
        )

    def _parameter_entry(self, expr: cst.BaseExpression) -> bool:
        """`self.splats["means"]` of a parameter container, or a parameter
        of a function every call passes one to: a Parameter, a leaf."""
        if isinstance(expr, cst.Subscript):
            return self._parameter_container(expr.value)
        if isinstance(expr, cst.Name) and not self.index.is_receiver(expr):
            scope = self.values.scope(self.index.scope_of(expr))
            if scope.reaching(expr) or expr.value not in scope.params:
                return False
            if expr in self._busy:
                return False
            self._busy.add(expr)
            try:
                passed = self._passed_for(self.index.scope_of(expr), expr.value)
                return bool(passed) and all(isinstance(v, cst.Subscript) and self._parameter_entry(v) for v in passed)
            finally:
                self._busy.discard(expr)
        return False

    # Parameters whose `requires_grad` flag a function sets -------------------

    def flagged_params(self, function: cst.FunctionDef) -> Dict[str, bool]:
        """The parameters of `function` on whose tensor it sets the
        `requires_grad` flag (`p.requires_grad = ...`, `p.requires_grad_(False)`),
        by name; True when it does so on their elements: a loop over the
        parameter, over a generator of the file that yields its elements
        (`for p in _iter_params(items)`), or handing them on to another such
        function (`freeze(*items)`)."""
        if function in self._flags:
            return self._flags[function]
        self._flags[function] = {}  # recursion: nothing yet
        found: Dict[str, bool] = {}
        scope = self.values.scope(function)
        statements = [*self.index.descendants(function.body, cst.Assign), *self.index.descendants(function.body, cst.Expr)]
        for statement in statements:
            if self.index.scope_of(statement) is not function:
                continue
            tensor = _flag_target(statement)
            if tensor is not None:
                for param, elements in self._origins(tensor, function):
                    found[param] = found.get(param, False) or elements
        for call in self.index.descendants(function.body, cst.Call):
            if self.index.scope_of(call) is not function:
                continue
            callees = self.callees(call)
            if len(callees) != 1 or callees[0] is function:
                continue
            for param, elements in self._passed_params(call, callees[0], scope):
                found[param] = found.get(param, False) or elements
        self._flags[function] = found
        return found

    @cached_property
    def _flagging_names(self) -> FrozenSet[str]:
        """Names of the file's functions that touch a `requires_grad` flag,
        themselves or through a function of the file they call by name: only
        a call of one of these can flag its arguments (a cheap first test,
        asked for every call of the file)."""
        functions = self.index.nodes(cst.FunctionDef)
        touches = {
            f.name.value for f in functions
            if any(a.attr.value in ("requires_grad", "requires_grad_") for a in self.index.descendants(f.body, cst.Attribute))
        }
        if not touches:
            return frozenset()  # most files: no need to gather every function's calls
        called = {f: {_tail(c.func) for c in self.index.descendants(f.body, cst.Call)} for f in functions}
        while True:
            more = {f.name.value for f in functions if f.name.value not in touches and called[f] & touches}
            if not more:
                return frozenset(touches)
            touches |= more

    def flagged_arguments(self, call: cst.Call) -> List[cst.BaseExpression]:
        """The arguments of `call` whose `requires_grad` flag the function it
        runs sets: for `frozen(model, delta)`, `model` and `delta`."""
        if _tail(call.func) not in self._flagging_names:
            return []
        callees = self.callees(call)
        if len(callees) != 1:
            return []
        function = callees[0]
        flagged = self.flagged_params(function)
        if not flagged:
            return []
        found: List[cst.BaseExpression] = []
        star = function.params.star_arg
        if isinstance(star, cst.Param) and flagged.get(star.name.value):
            found += [arg.value for arg in call.args[len(self._positional(function)):] if arg.keyword is None and not arg.star]
        bound = self.intent.bound_arguments(call, function)
        for name, elements in flagged.items():
            value = bound.get(name)
            if value is None:
                continue
            if not elements:
                found.append(value)
            elif isinstance(value, (cst.Tuple, cst.List)):
                found += [e.value for e in value.elements if not isinstance(e, cst.StarredElement)]
        return found

    def _positional(self, function: cst.FunctionDef) -> List[cst.Param]:
        positional = [*function.params.posonly_params, *function.params.params]
        if positional and positional[0].name.value == self.index.instance_param(function):
            positional = positional[1:]
        return positional

    def _passed_params(self, call: cst.Call, callee: cst.FunctionDef, scope) -> Iterator[Tuple[str, bool]]:
        """(parameter of the caller, elements?) that `call` hands to a
        parameter of `callee` whose flag it sets."""
        flagged = self.flagged_params(callee)
        star = callee.params.star_arg
        if isinstance(star, cst.Param) and star.name.value in flagged:
            for arg in call.args[len(self._positional(callee)):]:
                if arg.keyword is None and isinstance(arg.value, cst.Name) and self._is_param(arg.value, scope):
                    # `freeze(*items)`: the elements of `items`; `freeze(t)`: `t`.
                    yield arg.value.value, bool(arg.star) or False
        bound = self.intent.bound_arguments(call, callee)
        for name, elements in flagged.items():
            value = bound.get(name)
            if isinstance(value, cst.Name) and self._is_param(value, scope):
                yield value.value, elements

    def _is_param(self, read: cst.Name, scope) -> bool:
        return read.value in scope.params and not scope.reaching(read)

    def _origins(self, read: cst.Name, function: cst.FunctionDef) -> List[Tuple[str, bool]]:
        """The parameters of `function` (True: their elements) that `read` holds."""
        scope = self.values.scope(function)
        reaching = scope.reaching(read)
        if not reaching:
            return [(read.value, False)] if read.value in scope.params else []
        found: List[Tuple[str, bool]] = []
        for binding, _ in reaching:
            if not isinstance(binding, cst.For):
                continue
            iterable = binding.iter
            if isinstance(iterable, cst.Name) and self._is_param(iterable, scope):
                found.append((iterable.value, True))
            elif isinstance(iterable, cst.Call):
                callees = self.callees(iterable)
                if len(callees) != 1:
                    continue
                bound = self.intent.bound_arguments(iterable, callees[0])
                for name in self._yielded_params(callees[0]):
                    value = bound.get(name)
                    if isinstance(value, cst.Name) and self._is_param(value, scope):
                        found.append((value.value, True))
        return found

    def _yielded_params(self, generator: cst.FunctionDef) -> Set[str]:
        """The parameters whose elements `generator` yields: `for x in items: yield x`."""
        scope = self.values.scope(generator)
        found: Set[str] = set()
        for produced in self.index.descendants(generator.body, cst.Yield):
            value = produced.value
            if self.index.scope_of(produced) is not generator or not isinstance(value, cst.Name):
                continue
            for binding, _ in scope.reaching(value):
                iterable = binding.iter if isinstance(binding, cst.For) else None
                if isinstance(iterable, cst.Name) and self._is_param(iterable, scope):
                    found.add(iterable.value)
        return found

    # Values without graph --------------------------------------------------

    def without_graph(self, expr: cst.BaseExpression) -> bool:
        """Whether every input of `expr` is known to carry no graph."""
        key = (expr, self._assumed, self._cut_captures)
        if key in self._free:
            return self._free[key]
        if expr in self._busy or self._depth > _MAX_DEPTH:
            return False
        self._busy.add(expr)
        self._depth += 1
        try:
            result = self._without_graph(expr)
        finally:
            self._busy.discard(expr)
            self._depth -= 1
        self._free[key] = result
        return result

    @cached_property
    def hook_captures(self) -> HookCaptures:
        return HookCaptures(self.values)

    def cut_by_hook_captures(self, expr: cst.BaseExpression) -> List[Capture]:
        """The forward hooks' detached captures that leave `expr` without
        graph: `expr` has one when their stores are taken as graph-carrying,
        none when each, with the detached gradients backward hooks keep, is
        taken as cut (`F.mse_loss(probe.features["a"], ...)` of a hook storing
        `output.detach()`). Empty when `expr` has no graph anyway, or keeps one."""
        captures = self.hook_captures.captures
        forward = [c for c in captures if c.forward]
        if not forward or self.without_graph(expr):
            return []
        gradients = frozenset(c for c in captures if not c.forward)
        found = []
        for capture in forward:
            self._cut_captures = gradients | {capture}
            try:
                if self.without_graph(expr):
                    found.append(capture)
            finally:
                self._cut_captures = frozenset()
        if found:
            return found
        self._cut_captures = frozenset(captures)  # several hooks' captures together
        try:
            return forward if self.without_graph(expr) else []
        finally:
            self._cut_captures = frozenset()

    def without_graph_on_branch(self, expr: cst.BaseExpression) -> Optional[cst.CSTNode]:
        """The `if`/`else` block that, when it runs, leaves `expr` without
        graph although other paths give it one: a block that binds or
        returns constant tensors (`loss_bbox = torch.tensor(0.)` when a
        batch has no positive sample) for every term of `expr` that is not
        graph-free anyway. None when there is no such block, or `expr` is
        without graph on every path."""
        if self.without_graph(expr):
            return None
        for block in self._constant_blocks():
            self._assumed = block
            try:
                if self.without_graph(expr):
                    return block
            finally:
                self._assumed = None
        return None

    def _constant_blocks(self) -> List[cst.CSTNode]:
        """`if`/`else` blocks that bind a name to, or return, a torch factory's tensor."""
        if self._blocks is None:
            self._blocks = []
            for branch in self.index.nodes(cst.If):
                blocks = [branch.body]
                if isinstance(branch.orelse, cst.Else):
                    blocks.append(branch.orelse.body)
                for block in blocks:
                    if any(self._constant_statement(s) for s in block.body) and len(self._blocks) < _MAX_BLOCKS:
                        self._blocks.append(block)
        return self._blocks

    def _constant_statement(self, statement: cst.CSTNode) -> bool:
        if not isinstance(statement, cst.SimpleStatementLine):
            return False
        for small in statement.body:
            value = small.value if isinstance(small, (cst.Assign, cst.Return)) else None
            while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and self.names.qualified(value.func) is None:
                value = value.func.value  # `torch.zeros(1).sum()`
            if isinstance(value, cst.Call):
                qualified = self.names.qualified(value.func) or ""
                if qualified.count(".") == 1 and qualified.rsplit(".", 1)[-1] in FACTORIES and not any(
                    arg.keyword is not None and arg.keyword.value == "requires_grad" for arg in value.args
                ):
                    return True
        return False

    def _without_graph(self, expr: cst.BaseExpression) -> bool:
        free = self.without_graph
        if isinstance(expr, (cst.Integer, cst.Float, cst.Imaginary)):
            return True
        if isinstance(expr, cst.UnaryOperation):
            return free(expr.expression)
        if isinstance(expr, (cst.BinaryOperation, cst.BooleanOperation)):
            return free(expr.left) and free(expr.right)
        if isinstance(expr, cst.IfExp):
            return free(expr.body) and free(expr.orelse)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value == "data" and self.values.holds(expr.value) & Holds.PACKED:
                return False  # a PackedSequence's `.data`: the packed values, with their graph
            if expr.attr.value in _CUT_ATTRIBUTES:
                return True
            kept = self.hook_captures.captured(expr) if self._cut_captures else []
            return bool(kept) and all(capture in self._cut_captures for capture in kept)
        if isinstance(expr, cst.Subscript):
            return free(expr.value)
        if isinstance(expr, (cst.Tuple, cst.List, cst.Set)):
            return all(free(element.value) for element in expr.elements)
        if isinstance(expr, cst.Dict):
            return all(free(element.value) for element in expr.elements)
        if isinstance(expr, cst.DictComp):
            return free(expr.value)
        if isinstance(expr, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            return free(expr.elt)
        if isinstance(expr, cst.Name):
            return self._name_without_graph(expr)
        if isinstance(expr, cst.Call):
            return self._call_without_graph(expr)
        return False

    def _name_without_graph(self, read: cst.Name) -> bool:
        if read.value in _CONSTANTS:
            return True
        iterated = self._comprehension_source(read)
        if iterated is not None:
            return self.without_graph(iterated)
        scope_node = self.index.scope_of(read)
        scope = self.values.scope(scope_node)
        reaching = scope.reaching(read)
        if self._assumed is not None:
            # On the path through the assumed block: its last binding of the name.
            inside = [(b, v) for b, v in reaching if self.index.is_inside(b, self._assumed)]
            if inside:
                return self._binding_without_graph(read.value, *inside[0])
        if not reaching:
            passed = self._passed_for(scope_node, read.value) if read.value in scope.params else None
            return bool(passed) and all(self.without_graph(value) for value in passed)
        bindings = reaching + scope.loop_carried(read)
        return all(self._binding_without_graph(read.value, binding, value) for binding, value in bindings)

    def _comprehension_source(self, read: cst.Name) -> Optional[cst.BaseExpression]:
        """The iterable a comprehension's own target `read` takes its values from."""
        loop = self._comprehension_loop(read)
        return loop.iter if loop is not None else None

    def _comprehension_loop(self, read: cst.Name) -> Optional[cst.CompFor]:
        """The `for` clause of a comprehension around `read` that binds it."""
        for ancestor in self.index.ancestors(read):
            if isinstance(ancestor, (cst.BaseStatement, cst.BaseSmallStatement, cst.Lambda)):
                return None
            if isinstance(ancestor, _COMPREHENSIONS):
                loop: Optional[cst.CompFor] = ancestor.for_in
                while loop is not None:
                    if read.value in set(target_names(loop.target)) and not self.index.is_inside(read, loop.iter):
                        return loop
                    loop = loop.inner_for_in
        return None

    def _binding_without_graph(self, name: str, binding: cst.CSTNode, value: Optional[cst.BaseExpression]) -> bool:
        free = self.without_graph
        if isinstance(binding, cst.For):
            return free(binding.iter)
        if value is None:
            return False
        if isinstance(binding, cst.AugAssign):
            return free(value) and isinstance(binding.target, cst.Name) and free(binding.target)
        if isinstance(binding, cst.NamedExpr):
            return free(value)
        if not isinstance(binding, (cst.Assign, cst.AnnAssign)):
            return False
        position = unpacked_position(binding, name, from_one_value=True)
        if position is not None and returns_indices_at(value, position):
            return True  # `_, predicted = torch.max(outputs, 1)`: integer indices
        if isinstance(value, cst.Call):
            callees = self.callees(value)
            if callees:
                return len(callees) == 1 and self._returns_without_graph(callees[0], position, value)
        return free(value) and self._stores_without_graph(name, binding, strict=_is_container(value, self.values))

    def _returns_without_graph(self, function: cst.FunctionDef, position: Optional[int], call: Optional[cst.Call] = None) -> bool:
        """Whether every return of `function` gives, at `position` of a
        returned tuple (or as a whole), a value without graph."""
        returns = [r for r in self.index.descendants(function.body, cst.Return) if self.index.scope_of(r) is function]
        if not returns or any(self.index.scope_of(y) is function for y in self.index.descendants(function.body, cst.Yield)):
            return False
        if self._assumed is not None:
            # On the path through the assumed block: its own return, if it has one.
            returns = [r for r in returns if self.index.is_inside(r, self._assumed)] or returns
        if call is not None:
            # `if not keep: return loss.detach()` for `f(..., keep=False)`: the other returns do not run.
            returns = [r for r in returns if not self.intent.dead_for_call(r, function, call)] or returns
        for returned in returns:
            value = returned.value
            if value is None:
                return False
            if call is not None:
                value = self.intent.branch_for_call(value, function, call)
            if position is not None:
                if isinstance(value, cst.Call) and self.callees(value):
                    callees = self.callees(value)
                    if len(callees) != 1 or not self._returns_without_graph(callees[0], position):
                        return False
                    continue
                if not isinstance(value, cst.Tuple) or position >= len(value.elements):
                    return False
                value = value.elements[position].value
            if not self.without_graph(value):
                return False
        return True

    def _stores_without_graph(self, name: str, binding: cst.CSTNode, strict: bool) -> bool:
        """Whether what the scope writes into the object `name` bound by
        `binding` is without graph: `t[i] = v` (a tensor filled with a
        module's output requires grad from then on), `t.copy_(v)` and other
        in-place methods, `t.requires_grad_()`; for a container (`strict`)
        also `d.update(...)`, `l.append(v)`, and no use that could fill it
        otherwise (it is only indexed, iterated, read, returned or given to
        torch)."""
        scope = self.values.scope(binding)
        start = self.index.end[binding]
        reads = [read for read in scope.reads.get(name, ()) if self.index.order[read] >= start]
        # A nested function (a hook, a recursive collector) may run whenever it likes.
        for read in reads + scope.closure_reads.get(name, []):
            parent = self.index.parent(read)
            if isinstance(parent, cst.Subscript) and parent.value is read:
                holder = self.index.parent(parent)
                if isinstance(holder, cst.AssignTarget):
                    if not self.without_graph(self.index.parent(holder).value):
                        return False
                elif isinstance(holder, cst.AugAssign) and holder.target is parent:
                    if not self.without_graph(holder.value):
                        return False
                continue
            if isinstance(parent, cst.Attribute) and parent.value is read:
                holder = self.index.parent(parent)
                method = parent.attr.value
                if isinstance(holder, cst.AssignTarget) and method == "requires_grad":
                    return False
                if not isinstance(holder, cst.Call) or holder.func is not parent:
                    if strict:
                        return False
                    continue
                if method == "requires_grad_":
                    return False
                if method in STORING_METHODS or (method.endswith("_") and not method.startswith("_")):
                    if not all(self.without_graph(arg.value) for arg in holder.args if arg.keyword is None or strict):
                        return False
                elif strict and method not in READING_METHODS:
                    return False
                continue
            if strict and not self._only_read(read, parent):
                return False
        return True

    def _only_read(self, read: cst.Name, parent: Optional[cst.CSTNode]) -> bool:
        """`return d`, `for k in d`, `len(d)`, `torch.stack(d)`, `k in d`:
        uses that cannot put anything into the container."""
        if isinstance(parent, (cst.Return, cst.For, cst.CompFor, cst.ComparisonTarget)):
            return True
        if isinstance(parent, cst.Element) and isinstance(self.index.parent(parent), cst.Tuple):
            return isinstance(self.index.parent(self.index.parent(parent)), cst.Return)
        if isinstance(parent, cst.Arg) and parent.star == "":
            call = self.index.parent(parent)
            if isinstance(call, cst.Call):
                qualified = self.names.qualified(call.func) or ""
                local = dotted(call.func) or ""
                if qualified.startswith("torch."):
                    return True
                return local in _COMBINING_BUILTINS | {"len", "print", "isinstance", "any", "all"} and not self.values.defines(local)
        return False

    def _call_without_graph(self, call: cst.Call) -> bool:
        free = self.without_graph
        func = call.func
        positional = [arg for arg in call.args if arg.keyword is None]
        qualified = self.names.qualified(func)
        if qualified is None and isinstance(func, cst.Attribute):
            method = func.attr.value
            if method in _NO_GRAPH_RESULTS:
                return True
            if method == "requires_grad_":
                return False
            if self._builtin_criterion(func):
                return all(free(arg.value) for arg in positional)
            callees = self.callees(call)
            if callees:
                return len(callees) == 1 and self._returns_without_graph(callees[0], None, call)
            skipped = _INDEX_POSITIONS.get(method)
            return free(func.value) and all(free(arg.value) for i, arg in enumerate(positional) if i != skipped)
        if qualified in QUALIFIED_PYTHON_NUMBER_BUILTINS:
            return True
        if qualified is None and isinstance(func, cst.Name) and not self.values.defines(func.value):
            if func.value in QUALIFIED_PYTHON_NUMBER_BUILTINS:
                return True
            if func.value in ("dict", "list", "tuple", "set") and not call.args:
                return True  # an empty container; what is stored later is checked by its binding
            if func.value in _COMBINING_BUILTINS:
                return bool(positional) and all(free(arg.value) for arg in positional)
            if self._builtin_criterion(func):
                return all(free(arg.value) for arg in positional)
        if qualified is None:
            callees = self.callees(call)
            return len(callees) == 1 and self._returns_without_graph(callees[0], None, call)
        if not qualified.startswith("torch."):
            return False
        if any(arg.keyword is not None and arg.keyword.value == "requires_grad" for arg in call.args):
            return False
        last = qualified.rsplit(".", 1)[-1]
        if last in FACTORIES and qualified.count(".") == 1:
            return True
        skipped = _INDEX_POSITIONS.get(last)
        skipped = skipped + 1 if skipped is not None else None  # `torch.gather(input, dim, index)`
        return bool(positional) and all(free(arg.value) for i, arg in enumerate(positional) if i != skipped)

    def _builtin_criterion(self, func: cst.BaseExpression) -> bool:
        """`self.crit(...)` or `crit(...)` for a loss module of torch
        (`nn.BCELoss()`): it has no parameters, so its result carries
        only the graph of its inputs."""
        made = None
        if isinstance(func, cst.Attribute):
            stored = self.stored_on_self(func)
            made = stored[0] if len(stored) == 1 else None
        elif isinstance(func, cst.Name):
            values = self._reaching_values(func)
            made = values[0] if values and len(values) == 1 else None
        return isinstance(made, cst.Call) and self.values.modules.is_loss_constructor(made)



def _flag_target(statement: cst.CSTNode) -> Optional[cst.Name]:
    """The tensor whose flag `statement` sets where torch refuses it for a
    computed tensor: `t.requires_grad = ...`, `t.requires_grad_(False)`
    (`requires_grad_()` on a tensor that requires grad is accepted)."""
    if isinstance(statement, cst.Assign):
        for target in statement.targets:
            t = target.target
            if isinstance(t, cst.Attribute) and t.attr.value == "requires_grad" and isinstance(t.value, cst.Name):
                return t.value
    if isinstance(statement, cst.Expr) and isinstance(statement.value, cst.Call):
        func = statement.value.func
        args = statement.value.args
        if (
            isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_" and isinstance(func.value, cst.Name)
            and args and isinstance(args[0].value, cst.Name) and args[0].value.value == "False"
        ):
            return func.value
    return None


def _all_known(kinds: List[Holds]) -> Holds:
    """The union of `kinds`, or NOTHING when one of them is unknown."""
    if not kinds or not all(kinds):
        return Holds.NOTHING
    result = Holds.NOTHING
    for kind in kinds:
        result |= kind
    return result


def _combined(left: Holds, right: Holds) -> Holds:
    """What arithmetic on two values holds: computed when either requires grad."""
    if (left | right) & GRAD:
        return Holds.ACTIVATION
    if left and right:
        return Holds.DETACHED if (left | right) & Holds.DETACHED else Holds.NUMBER
    return Holds.NOTHING


def _is_container(value: cst.BaseExpression, values: "ValueFacts") -> bool:
    if isinstance(value, _CONTAINERS):
        return True
    return isinstance(value, cst.Call) and dotted(value.func) in ("dict", "list", "set") and not values.defines(dotted(value.func) or "")


def _tail(func: cst.BaseExpression) -> Optional[str]:
    """`f` for `f(...)`, `obj.f(...)` and `self.a.f(...)`."""
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return func.value if isinstance(func, cst.Name) else None
