"""The abstract interpreter: what every expression of a file may hold when it runs.

The file runs abstractly from its entry points: the module body (with its
`__main__` block), then every function or method that no call reached, on
unknown arguments: each one symbolic object, so that a model handed in is
one thing whose `.parameters()`, members and outputs are seen to be its own
(a method of it that one class of the file alone defines is read as that
class's, a prior kept in `priors`). A call of the file's own code is interpreted in its
caller's context, with the values the caller passes (memoised per context,
within a budget; past it the result is unknown, never "no graph"), so the
untyped `model` of `train(model, ...)` is the module `__main__` built.

A value is a tensor, module, optimizer, container, function or class, a
constant, or unknown; for tensors, the *origins* it depends on through
operations autograd records (module instances and leaf tensors that require
grad) and the last cuts that dropped origins on each path (`.detach()`,
`.data`, `.item()`, indices, a no-grad region, a deep copy's outputs),
with what each cut dropped (`dropped`). Objects live on a heap by
allocation site and calling context: modules with their fields and forward
hooks, optimizers with the origins they own, lists and dicts per key plus
one summary element. Events (forward, backward, step, zero_grad) are kept
in the order they ran, with the calls they ran under; parameters the
program freezes, sets by hand or hands to code it cannot see are noted. Grad mode is part of the
state (`with torch.no_grad()`, decorators, `set_grad_enabled(flag)` with
the flag evaluated), and literal flags select branches.

Statements are interpreted in order over the syntax tree: both arms of an
`if` joined, loop bodies iterated until their state stops growing, `break`,
`continue`, `return` and `raise` ending their path, handlers of a `try`
entered from any point of its body. Every expression's value is recorded,
joined over every context it ran in; rules ask `value_of(expr)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

import libcst as cst

from detachlint.analysis.index import FileIndex
from detachlint.analysis.modules import ModuleFacts
from detachlint.analysis.names import ImportTable, all_params, dotted
from detachlint.analysis.priors import duck_typed
from detachlint.analysis.vocabulary import (
    COPYING_CONSTRUCTORS,
    DETACHING_METHODS,
    FACTORIES,
    GRAPH_CUTTING_ATTRIBUTES,
    INDEX_METHODS,
    IDENTITY_BUILTINS,
    INSPECTING_BUILTINS,
    MODULE_API,
    MODULE_RETURNING_SELF,
    NEW_VALUE_FUNCTIONS,
    NO_GRAPH_ATTRIBUTES,
    NO_GRAPH_METHODS,
    NOT_VALUE_EDITS,
    NOT_TENSOR_FUNCTIONS,
    NOT_TENSOR_METHODS,
    PARAMETER_ITERATORS,
    PYTHON_NUMBER_BUILTINS,
    SIZE_METHODS,
    SPLITTING_METHODS,
    STORING_METHODS,
    SUBMODULE_ITERATORS,
    TENSOR_METADATA,
    TO_PYTHON_METHODS,
    VALUES_AND_INDICES,
    VARIABLE_CLASSES,
    VIEW_METHODS,
)

# Kinds of values.
UNKNOWN = "unknown"
TENSOR = "tensor"
NUMBER = "number"  # also strings, booleans, None: constants
MODULE = "module"
OPTIMIZER = "optimizer"
CONTAINER = "container"  # a list, dict or set on the heap
TUPLE = "tuple"  # positions known
ITERATOR = "iterator"  # what iterating it gives is `element`
FUNCTION = "function"  # the file's functions, lambdas, classes, bound methods
EXTERNAL = "external"  # something imported: its qualified name is `const`
OBJECT = "object"  # an instance of one of the file's classes that is not a module
# What a parameter of a function no call reached holds: unknown, but one
# object, so that its `.parameters()` and its outputs are seen to be the same.
SYMBOLIC = "symbolic"
ARRAY = "array"  # a NumPy array or other value outside torch
# The storage of a tensor a factory made (`torch.zeros(1)`): kept in a field
# or a dict, it outlives the step that edits it in place (`total.add_(loss)`).
STORAGE = "storage"
# In-place ops whose result depends on the tensor's own old value: each one
# records a node on top of the tensor's history, so its graph chains.
_ACCUMULATING = frozenset({"add_", "sub_", "mul_", "div_", "addcmul_", "addcdiv_", "lerp_"})

_NO = object()  # no constant known
_EMPTY: FrozenSet = frozenset()

_CALL_BUDGET = 3000  # interpreted calls per file
_EVENT_CAP = 20000  # events kept per file; past it, memoised calls are not replayed
# Events whose order the queries read (a step after a backward, a zeroing between steps).
_SEQUENCED = frozenset({"backward", "grad", "step", "zero_grad"})
_DEPTH = 10  # nested calls interpreted in one context
_LOOP_PASSES = 3
_NO_GRAD = frozenset({"torch.no_grad", "torch.inference_mode"})
# Calls that switch grad mode for what runs after them (a `with` restores it).
_SETS_GRAD_MODE = frozenset({"torch.set_grad_enabled", "torch._C._set_grad_enabled"})
# Kinds of values that are objects, never `None`.
_NEVER_NONE = frozenset({"tensor", "module", "optimizer", "container", "object", "function"})



@dataclass(frozen=True)
class Value:
    kind: str = UNKNOWN
    # Modules and leaf tensors this value's graph reaches.
    origins: FrozenSet = _EMPTY
    # Nodes where a graph from some origins was dropped on the way here.
    cuts: FrozenSet = _EMPTY
    # Heap objects, functions and classes this value may be.
    refs: FrozenSet = _EMPTY
    items: Optional[Tuple["Value", ...]] = None  # a tuple's positions
    element: Optional["Value"] = None  # what iterating an iterator gives
    const: object = _NO
    # Part of it comes from something the interpreter cannot see (an unknown
    # argument, a call of another package's code): its graph may reach further.
    opaque: bool = False
    # The module calls (and the contexts they ran in) whose recorded graph it carries.
    made_by: FrozenSet = _EMPTY
    # A leaf tensor (a parameter, `nn.Parameter(...)`, a `requires_grad=True`
    # factory) or a view of one (`w[0]`, `b.view(3, -1)`); not the result of
    # an operation on one. Editing it in place with autograd on raises.
    leaf: bool = False

    @property
    def in_graph(self) -> bool:
        return bool(self.origins)


UNKNOWN_VALUE = Value(opaque=True)
NO_GRAPH_TENSOR = Value(TENSOR)
A_NUMBER = Value(NUMBER)


def constant(value: object) -> Value:
    return Value(NUMBER, const=value)


def join(a: Optional[Value], b: Optional[Value]) -> Optional[Value]:
    """What a value may be where two paths meet."""
    if a is None or a is b or a == b:
        return b
    if b is None:
        return a
    kind = a.kind if a.kind == b.kind else _joined_kind(a, b)
    items = None
    if a.items is not None and b.items is not None and len(a.items) == len(b.items):
        items = tuple(join(x, y) for x, y in zip(a.items, b.items))
    element = join(a.element, b.element) if (a.element is not None or b.element is not None) else None
    return Value(
        kind,
        a.origins | b.origins,
        a.cuts | b.cuts,
        a.refs | b.refs,
        items,
        element,
        a.const if a.const == b.const and type(a.const) is type(b.const) else _NO,
        a.opaque or b.opaque,
        a.made_by | b.made_by,
        a.leaf and b.leaf,
    )


def _joined_kind(a: Value, b: Value) -> str:
    """A tensor or a number it starts from (`total = 0`, `d.get("loss", 0)`):
    a tensor for what it may hold. `None` stays apart: `x is None` asks it."""
    for x, y in ((a, b), (b, a)):
        if x.kind == TENSOR and y.kind == NUMBER and type(y.const) in (int, float):
            return TENSOR
    return UNKNOWN


def join_all(values: Iterable[Optional[Value]]) -> Optional[Value]:
    result = None
    for value in values:
        result = join(result, value)
    return result


def graph_of(values: Iterable[Optional[Value]], kind: str = TENSOR, depth: int = 0) -> Value:
    """A tensor computed from `values` by an operation autograd records
    (`torch.cat` of a list takes the graphs of the list's elements)."""
    origins, cuts, made_by = set(), set(), set()
    opaque = False
    for value in values:
        if value is None:
            continue
        if depth < 3:
            held = [r.elements for r in value.refs if isinstance(r, Obj) and r.kind == CONTAINER and r.elements is not None]
            if held:
                inner = graph_of(held, kind, depth + 1)
                origins |= inner.origins
                cuts |= inner.cuts
                made_by |= inner.made_by
                opaque = opaque or inner.opaque
        origins |= value.origins
        cuts |= value.cuts
        made_by |= value.made_by
        opaque = opaque or (value.opaque and value.kind not in (MODULE, OPTIMIZER, FUNCTION))
        if value.items is not None:
            inner = graph_of(value.items)
            origins |= inner.origins
            cuts |= inner.cuts
            made_by |= inner.made_by
            opaque = opaque or inner.opaque
    return Value(kind, frozenset(origins), frozenset(cuts), opaque=opaque, made_by=frozenset(made_by))


def cut(value: Value, node: cst.CSTNode, kind: str = TENSOR) -> Value:
    """`value` with its graph dropped at `node`. `cuts` keeps the last cut on
    each path: those before it could not change what reaches a loss."""
    if value.origins:
        cuts = frozenset({node})
    elif value.opaque:  # what it may carry from unknown code ends here; what was cut before stays cut
        cuts = value.cuts | {node}
    else:
        cuts = value.cuts
    return Value(kind, _EMPTY, cuts)


class Obj:
    """A heap object: one per allocation site (and the context that ran it)."""

    __slots__ = ("site", "kind", "klass", "qualified", "fields", "keys", "elements", "params", "owns", "copied_from", "hooks", "root")

    def __init__(self, site: cst.CSTNode, kind: str, klass: Optional[cst.ClassDef] = None, qualified: Optional[str] = None) -> None:
        self.site = site
        self.kind = kind
        self.klass = klass
        self.qualified = qualified
        self.fields: Dict[str, Value] = {}
        self.keys: Dict[object, Value] = {}
        self.elements: Optional[Value] = None
        self.params = False  # a module with parameters of its own
        self.owns: FrozenSet = _EMPTY  # an optimizer's origins
        self.copied_from: Optional["Obj"] = None  # made by `copy.deepcopy` of it
        self.hooks: Optional[Value] = None  # forward hooks registered on a module
        self.root: "Obj" = self  # a symbolic object's parameter, its members' too

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"<{self.kind} {self.qualified or (self.klass.name.value if self.klass else '')}>"


@dataclass
class Bound:
    """A method of the file bound to the objects it was read from."""

    function: cst.FunctionDef
    receiver: Value

    def __hash__(self) -> int:
        return hash((id(self.function), self.receiver))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Bound) and other.function is self.function and other.receiver == self.receiver


@dataclass
class Event:
    kind: str  # "backward", "grad" (torch.autograd.grad), "step", "zero_grad", "forward"
    node: cst.CSTNode
    value: Value
    grad: Optional[bool]
    calls: Tuple[cst.CSTNode, ...] = ()  # the calls it ran under, outermost first
    contexts: Tuple[object, ...] = ()  # the context each of those calls was made in, then its own
    mode_set_by: FrozenSet = _EMPTY  # the `set_grad_enabled` calls that set the mode it ran in
    call_modes: Tuple[Optional[bool], ...] = ()  # the grad mode each of `calls` was made in


class _Stop(Exception):
    pass


@dataclass
class _Frame:
    function: Optional[cst.CSTNode]
    returns: Optional[Value] = None
    loops: List[Tuple[List[dict], List[dict]]] = field(default_factory=list)  # (breaks, continues)
    exit_modes: List[object] = field(default_factory=list)  # the grad mode each `return` left, `_NO` if unchanged
    # The modes the grad-mode `with` blocks being run restore when left, outermost first.
    restores: List[object] = field(default_factory=list)
    loop_restores: List[int] = field(default_factory=list)  # len(restores) when each loop being run began


_TERMINATED = None  # the state after `return`, `raise`, `break`, `continue`
# The environment's slot for the grad mode a `set_grad_enabled(flag)` call
# left (it lasts past the statement, and past the function that made it).
_GRAD_MODE = "<grad mode>"


class Interpreter:
    def __init__(self, index: FileIndex, names: ImportTable, modules: ModuleFacts) -> None:
        self.index = index
        self.names = names
        self.modules = modules
        self.values: Dict[cst.CSTNode, Value] = {}
        self.grad: Dict[cst.CSTNode, set] = {}  # grad modes each call ran in
        self.events: List[Event] = []
        # Origins whose parameters the program stops requiring grad.
        self.frozen: set = set()
        self.grafted: set = set()  # parameters of modules put in place of another's layer
        self.loaded: set = set()  # parameters of modules given weights from a checkpoint
        self.thawed: set = set()
        # The origins whose graph each cut node dropped.
        self.dropped: Dict[cst.CSTNode, set] = {}
        self.cut_calls: Dict[cst.CSTNode, Tuple[cst.CSTNode, ...]] = {}  # the calls each cut ran under
        # Origins handed to code the interpreter cannot see, whose values are
        # set by hand (`.data` edits, `load_state_dict`, `p.grad = ...`).
        self.escaped: set = set()
        self.set_by_hand: set = set()
        self.grads_read: set = set()  # origins whose `.grad` the program copies to other parameters
        self.grads_by_hand: set = set()  # origins whose `.grad` the program sets or edits in place
        self.forced: Dict[cst.CSTNode, FrozenSet] = {}  # leaves forced on cut values, with those cuts
        self.cut_terms: Dict[cst.CSTNode, FrozenSet] = {}  # sums with a term whose graph was cut, and those cuts
        self.grads_seen: set = set()  # origins whose `.grad` the program reads
        # Module calls run with autograd on: (context, standalone) per call node;
        # which of their graphs a backward used, and which went where it cannot see.
        self.forward_runs: Dict[cst.CSTNode, set] = {}
        self.backpropagated: set = set()
        self.escaped_forwards: set = set()
        self.module_calls: set = set()
        self.forward_params: Dict[cst.CSTNode, set] = {}
        self.dropped_made: Dict[cst.CSTNode, set] = {}  # the module calls' graphs each cut dropped
        self.eval_switched: set = set()  # parameters of modules put in eval mode
        self.globals: Dict[str, Value] = {}  # every value a module-level name is bound to
        # The module's names as they stand when the module-level statement being run runs:
        # what a function it calls reads (a notebook rebinds `y_pred` from a tensor to a list).
        self._globals_now: Optional[dict] = None
        self._objects: Dict[Tuple[cst.CSTNode, object], Obj] = {}
        self._summaries: Dict[cst.ClassDef, Obj] = {}
        self._memo: Dict[tuple, Value] = {}
        self._memo_events: Dict[tuple, List["Event"]] = {}  # what a memoised call did, to replay
        self._memo_modes: Dict[tuple, object] = {}  # the grad mode a memoised call left
        self._reentered: set = set()  # (method, receiver) pairs being run
        self._grad_change: object = _NO  # the mode a call in the current statement left
        self._mode_now: Optional[Value] = None  # the mode the current statement runs in
        self._active: set = set()
        self._analysed: set = set()
        self._budget = _CALL_BUDGET
        self._depth = 0
        self._heap_changed = False
        self._closures: Dict[cst.CSTNode, dict] = {}
        self._contexts: Dict[tuple, int] = {}  # a number for each call context seen
        self._calls: List[int] = []
        self._call_nodes: List[cst.CSTNode] = []
        self._call_contexts: List[object] = []
        self._call_modes: List[Optional[bool]] = []  # the grad mode each call on the stack was made in
        self._method_names: Optional[Dict[str, List[cst.ClassDef]]] = None
        self._standalone_run = False
        self._run()

    # Queries -------------------------------------------------------------

    def value_of(self, expr: cst.CSTNode) -> Optional[Value]:
        """What `expr` held, joined over every context it ran in; None where it never ran."""
        return self.values.get(expr)

    def in_graph(self, expr: cst.CSTNode) -> bool:
        """Whether `expr` may hold a tensor that requires grad: its graph reaches
        parameters or leaves the program does not freeze."""
        value = self.values.get(expr)
        return value is not None and self.in_graph_value(value)

    def made_by_unseen_code(self, expr: cst.CSTNode) -> bool:
        """What a call of code the interpreter cannot see returned (another
        file's helper, a library): it may be a tensor, an array or anything."""
        value = self.values.get(expr)
        return value is not None and value.kind == UNKNOWN and value.opaque

    def in_graph_value(self, value: Value) -> bool:
        return any(not (isinstance(o, Obj) and o.kind == SYMBOLIC) for o in self.live(value))

    def dropped_parameters(self, node: cst.CSTNode) -> FrozenSet:
        """The parameters that require grad whose graph was dropped at `node`."""
        return frozenset(self.dropped.get(node, set())) - self.frozen

    def modules_held(self, expr: cst.CSTNode) -> FrozenSet:
        """The modules (and parameters of unknown objects) `expr` holds, with
        their submodules, that require grad."""
        value = self.values.get(expr)
        if value is None or not any(isinstance(r, Obj) and r.kind in (MODULE, SYMBOLIC) for r in value.refs):
            return _EMPTY
        return self.module_closure(value) - self.frozen

    def holds_no_graph(self, expr: cst.CSTNode) -> bool:
        """Whether `expr` was seen to run and holds, in every context, a value
        with no graph now: data, or a tensor whose graph was cut."""
        value = self.values.get(expr)
        return value is not None and self._no_graph(value)

    def _no_graph(self, value: Value, depth: int = 0) -> bool:
        if value.opaque:
            return False
        if value.kind == TUPLE and value.items is not None and depth < 3:
            return all(self._no_graph(item, depth + 1) for item in value.items)  # `(flag, loss.item(), grads)`
        if value.kind == ITERATOR and value.element is not None and not value.origins and depth < 3:
            return self._no_graph(value.element, depth + 1)  # what `torch.autograd.grad` returns
        if value.kind == CONTAINER and depth < 3:  # `[p.grad.clone() for p in ...]`
            held = [r for r in value.refs if isinstance(r, Obj)]
            return bool(held) and all(
                r.kind == CONTAINER and all(self._no_graph(v, depth + 1) for v in list(r.keys.values()) + ([r.elements] if r.elements is not None else []))
                for r in held
            )
        return value.kind in (TENSOR, NUMBER, ARRAY) and not self.live(value)

    def known_without_graph(self, expr: cst.CSTNode) -> bool:
        """Whether `expr` was seen to run and holds, in every context, data:
        numbers, tensors no graph ever reached, outputs of frozen modules.
        Not a value whose graph was cut on its way here."""
        value = self.values.get(expr)
        return value is not None and not value.opaque and not value.cuts and value.kind in (TENSOR, NUMBER, ARRAY) and not self.live(value)

    def graphs_for_nothing(self) -> List[Tuple[cst.CSTNode, cst.CSTNode]]:
        """(where, module call) for module calls that ran, from an entry point,
        with autograd on over parameters that require grad (of a model the
        program trains or puts in eval mode), pass after pass of a loop that
        runs no backward, in a context where no backward ever used
        the graph they recorded and it went nowhere the interpreter cannot
        see. `where` is the call itself, or the call in the loop that led to it."""
        trained = set(self.eval_switched) | self.loaded  # a model in use: trained here, evaluated, or loaded
        meant: set = set()  # graphs on their way to a backward, dropped by a cut on the way (DL201's)
        for event in self.events:
            if event.kind in ("backward", "grad", "step"):
                trained |= event.value.origins
            if event.kind in ("backward", "grad"):
                for cut_node in event.value.cuts:
                    meant |= self.dropped_made.get(cut_node, set())
        found = []
        for node, runs in self.forward_runs.items():
            if not self.forward_params.get(node, set()) & trained:
                continue  # a model the program neither trains nor evaluates: no evaluation loop
            for context, standalone, frames in runs:
                # A module run inside another's forward is part of that one:
                # its loops (over time steps, layers) are the model's own.
                outer = next((i for i, (call, _) in enumerate(frames) if call in self.module_calls), None)
                if outer is not None:
                    continue  # judged as part of the outer module's call
                made = (node, context)
                if standalone or made in self.backpropagated or made in self.escaped_forwards or made in meant:
                    continue
                where, loop, loop_context = node, self._loop_around(node), context
                for call, made_in in reversed(frames):
                    if loop is not None:
                        break
                    where, loop, loop_context = call, self._loop_around(call), made_in
                if loop is None or self._backward_ran_in(loop, loop_context, beside=where):
                    continue
                function = self.index.enclosing(loop, cst.FunctionDef)
                if function is not None and self._backward_ran_in(function, loop_context):
                    continue  # outputs gathered, then backpropagated after the loop: training
                found.append((where, node))
                break
        return found

    def graphs_kept_across_passes(self) -> List[Tuple[cst.CSTNode, Tuple[cst.CSTNode, ...]]]:
        """In-place accumulations (`total += loss`, `stats["loss"].add_(loss)`)
        and stores in new container slots (`log[step] = loss`), with autograd
        on, of a value whose graph reaches trainable parameters, into a tensor
        or container made before a loop whose every pass runs a backward: each
        pass's graph, backpropagated already, stays alive in what outlives it.
        (A loop with no backward builds the graph it sums for one backward
        after it: a loss over micro-batches, an RNN's steps, a meta-learner's
        inner loop of `autograd.grad`.) With the calls it ran under."""
        found = []
        for event in self.events:
            # A model handed in counts: the loop runs a backward through it.
            if event.kind != "accumulate" or not self.live(event.value):
                continue
            loop, context = self._loop_around(event.node), event.contexts[-1] if event.contexts else None
            for call, made_in in reversed(list(zip(event.calls, event.contexts))):
                if loop is not None:
                    break
                loop, context = self._loop_around(call), made_in
            if loop is None or all(self.index.is_inside(s.site, loop) for s in event.value.refs):
                continue
            if self._backward_ran_in(loop, context, kinds=("backward",)) and all(event.node is not n for n, _ in found):
                found.append((event.node, event.calls))
        return found

    def copies_backpropagated(self) -> List[Tuple[cst.CSTNode, cst.CSTNode]]:
        """(module call, backward) for module calls run with autograd on whose
        graph a backward reaches, over parameters that no optimizer owns and
        that the program sets by copying another module's (a target network
        synced by `load_state_dict`, an EMA teacher), while an optimizer steps
        other parameters: gradients leak into what only copies should change.
        Not when the program copies those gradients to other parameters (an
        A3C worker's, to the shared model)."""
        owned = self._owned_by_optimizers()
        if not owned or not any(e.kind == "step" for e in self.events):
            return []
        found = []
        for event in self.events:
            if event.kind != "backward" or event.grad is False:
                continue
            for node, _ in event.value.made_by:
                params = set(self.forward_params.get(node, ())) - self.frozen
                if params & self.grads_read:
                    continue  # gradients computed to be copied (a worker's, to the shared model)
                if params and not params & owned and params <= self.set_by_hand and all(n is not node for n, _ in found):
                    found.append((node, event.node))
        return found

    def steps_on_stale_gradients(self) -> List[Tuple[cst.CSTNode, FrozenSet]]:
        """(step, optimizers) for optimizer steps, the first of each optimizer, that update parameters a
        backward filled since the same step last ran, with nothing clearing
        their gradients in between (no `zero_grad()` of an optimizer or module
        that holds them, no `.grad = None` or in-place edit of `.grad`): each
        step applies the sum of every earlier pass's gradients."""
        found: List[Tuple[cst.CSTNode, FrozenSet]] = []
        last: Dict[cst.CSTNode, int] = {}
        for i, event in enumerate(self.events):
            if event.kind != "step":
                continue
            previous = last.get(event.node)
            last[event.node] = i
            if previous is None:
                continue
            between = self.events[previous + 1 : i]
            zeroed = set().union(*(e.value.origins for e in between if e.kind == "zero_grad"))
            filled = set().union(*(self.live(e.value) for e in between if e.kind == "backward"))
            stale = (set(event.value.origins) & filled) - zeroed - self.grads_by_hand - self.frozen
            # Made afresh each pass (an attack's optimizer over a new `delta`): nothing carries over.
            loop = self._loop_around(event.node)
            if loop is not None:
                if any(isinstance(r, Obj) and self.index.is_inside(r.site, loop) for r in event.value.refs):
                    continue
                stale = {o for o in stale if not (isinstance(o, cst.CSTNode) and self.index.is_inside(o, loop))}
            if stale and all(node is not event.node and not (refs & event.value.refs) for node, refs in found):
                found.append((event.node, event.value.refs))
        return found

    def forced_backpropagated(self) -> List[Tuple[cst.CSTNode, FrozenSet, cst.CSTNode]]:
        """(forcing node, the cuts before it, backward) for backwards, with
        autograd on, whose graph reaches nothing but leaves forced with
        `requires_grad = True` onto values whose graph was cut, whose gradient
        nothing reads or steps, while an optimizer steps parameters no backward
        reaches: the error "does not require grad" silenced, and nothing trains."""
        never = self.never_trained()
        if not never:
            return []  # something trains: the forced leaf is not what stands in its way
        owned = self._owned_by_optimizers()
        found = []
        for event in self.events:
            if event.kind != "backward" or event.grad is False or event.value.opaque:
                continue
            live = self.live(event.value)
            if live and all(o in self.forced for o in live) and not live & (self.grads_seen | owned):
                for origin in live:
                    if all(origin is not f for f, _, _ in found):
                        found.append((origin, self.forced[origin], event.node))
        return found

    def cut_terms_backpropagated(self) -> List[Tuple[cst.CSTNode, cst.CSTNode]]:
        """(cut, backward) for terms whose graph a cut dropped (`.item()`, a
        NumPy round trip, `torch.tensor(...)`, `argmax`), added to a loss that
        keeps a graph, which a backward with autograd on runs: the term adds
        nothing to any gradient, though the graph it was cut from required grad."""
        found = []
        for event in self.events:
            if event.kind != "backward" or event.grad is False or not self.live(event.value):
                continue
            for cuts in self.cut_terms.values():
                for cut_node in cuts:
                    if cut_node in event.value.cuts and all(cut_node is not c for c, _ in found):
                        found.append((cut_node, event.node))
        return found

    def backwards_with_autograd_off(self) -> List[cst.CSTNode]:
        """Backwards (and `autograd.grad` calls) that ran, in every context,
        with autograd off (inside a caller's `no_grad`, an attack run from an
        evaluation under `no_grad`) on a value that therefore has no graph:
        torch raises."""
        modes: Dict[cst.CSTNode, set] = {}
        for event in self.events:
            if event.kind in ("backward", "grad"):
                # A loss built with autograd on backpropagates fine inside `no_grad`.
                graphless = not self.live(event.value) and not event.value.opaque
                modes.setdefault(event.node, set()).add(event.grad if graphless else True)
        return [node for node, seen in modes.items() if seen == {False}]

    def backwards_run_with_autograd_off(self) -> List[Tuple[cst.CSTNode, cst.CSTNode]]:
        """(call, backward) for backwards that ran with autograd on in some
        contexts but, in the context of `call`, a call made with autograd off
        (an attack's `generate()` inside an evaluation's `no_grad`), on a
        value that therefore had no graph: that call raises."""
        every = set(self.backwards_with_autograd_off())
        found: Dict[cst.CSTNode, cst.CSTNode] = {}
        for event in self.events:
            if event.kind not in ("backward", "grad") or event.node in every or event.grad is not False:
                continue
            if self.live(event.value) or event.value.opaque:
                continue
            where = next((call for call, mode in zip(event.calls, event.call_modes) if mode is False), None)
            if where is not None and where is not event.node:
                found.setdefault(where, event.node)
        return list(found.items())

    def grad_mode_left_off(self) -> List[Tuple[cst.CSTNode, cst.CSTNode]]:
        """(`set_grad_enabled(False)` call, backward) where a function turned
        autograd off and returned without turning it back on, and a backward
        its callers run later had, in every context, no graph for it."""
        off = set(self.backwards_with_autograd_off())
        found: Dict[cst.CSTNode, cst.CSTNode] = {}
        for event in self.events:
            if event.node not in off:
                continue
            function = self.index.enclosing(event.node, cst.FunctionDef)
            for setter in event.mode_set_by:
                made_in = self.index.enclosing(setter, cst.FunctionDef)
                if made_in is not None and made_in is not function:
                    found.setdefault(setter, event.node)
        return list(found.items())

    def leaf_edits(self) -> List[cst.CSTNode]:
        """In-place ops, with autograd on, on a leaf that requires grad (a
        parameter, `nn.Parameter(...)`, a `requires_grad=True` tensor) in every
        context they ran in: torch raises."""
        edits = {}
        for event in self.events:
            if event.kind == "leaf_edit":
                edits.setdefault(event.node, set()).add(event.grad)
        return [node for node, modes in edits.items() if False not in modes and False not in self.grad_modes(node)]

    def _owned_by_optimizers(self) -> set:
        """Every origin some optimizer the program built owns."""
        return set().union(*(obj.owns for obj in self._objects.values() if obj.kind == OPTIMIZER))

    def _loop_around(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        """The innermost `for` or `while` around `node` in its own function."""
        function = self.index.enclosing(node, cst.FunctionDef)
        for ancestor in self.index.ancestors(node):
            if ancestor is function:
                break
            if isinstance(ancestor, (cst.For, cst.While, cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)):
                # The iterable of a `for` or of a comprehension's first `for` runs once.
                once = ancestor.iter if isinstance(ancestor, cst.For) else getattr(getattr(ancestor, "for_in", None), "iter", None)
                if once is not None and (once is node or self.index.is_inside(node, once)):
                    continue
                return ancestor
        return None

    def _backward_ran_in(
        self, loop: cst.CSTNode, context: object, kinds: Tuple[str, ...] = ("backward", "grad"), beside: Optional[cst.CSTNode] = None
    ) -> bool:
        """A backward ran inside `loop` in `context`: written there, or in code
        it called. With `beside`, only one that can run in the same pass: not
        in the other branch of an `if` in the loop (a test every few steps)."""
        for event in self.events:
            if event.kind not in kinds:
                continue
            own = event.contexts[-1] if event.contexts else None
            sites = [call for call, made_in in zip(event.calls, event.contexts) if made_in == context]
            if own == context:
                sites.append(event.node)
            for site in sites:
                if self.index.is_inside(site, loop) and (beside is None or not self._other_branch(site, beside, loop)):
                    return True
        return False

    def _other_branch(self, a: cst.CSTNode, b: cst.CSTNode, loop: cst.CSTNode) -> bool:
        """`a` and `b` sit in different branches of one `if` inside `loop`."""
        for ancestor in self.index.ancestors(b):
            if ancestor is loop:
                return False
            if isinstance(ancestor, cst.If) and self.index.is_inside(a, ancestor):
                in_body = self.index.is_inside(b, ancestor.body)
                return in_body != self.index.is_inside(a, ancestor.body)
        return False

    def never_trained(self) -> FrozenSet:
        """Origins some optimizer steps that no backward reaches and that the
        program does not freeze, set by hand, or hand to code it cannot see."""
        reached: set = set()
        stepped: set = set()
        for event in self.events:
            if event.kind == "backward":
                reached |= event.value.origins
            elif event.kind == "step":
                stepped |= event.value.origins
        # Which parameters of an unknown object a path reaches is unknown: one reached, all reached.
        families = {o.root for o in reached if isinstance(o, Obj) and o.kind == SYMBOLIC}
        reached |= {o for o in stepped if isinstance(o, Obj) and o.kind == SYMBOLIC and o.root in families}
        # A deep copy of a module that trains is a target or momentum network, kept out of the graph on purpose.
        copies: set = set()
        for obj in self._objects.values():
            if obj.copied_from is not None and self.module_closure(self._ref(obj.copied_from)) & reached:
                copies |= self.module_closure(self._ref(obj))
        return frozenset(stepped - reached - self.frozen - self.escaped - self.set_by_hand - copies)

    def starved_cuts(self) -> List[Tuple[cst.CSTNode, FrozenSet, List[Event], List[Event]]]:
        """Cuts on the way to a backward that keep out parameters the steps
        right after it (before the next backward) update, when no backward
        ever reaches them: (cut, those origins, the backwards, the steps).
        Origins the program freezes, sets by hand or hands to code it cannot
        see are left out (`never_trained`)."""
        never = self.never_trained()
        found: Dict[cst.CSTNode, Tuple[set, List[Event], List[Event]]] = {}
        events = self.events
        for i, event in enumerate(events):
            if event.kind != "backward" or not event.value.origins:
                continue  # a loss with no graph at all raises instead
            steps = []
            for later in events[i + 1:]:
                if later.kind == "backward":
                    break
                if later.kind == "step":
                    steps.append(later)
            stepped = set().union(*(s.value.origins for s in steps)) & never
            for node in event.value.cuts:
                starved = self.dropped.get(node, set()) & stepped
                if starved:
                    entry = found.setdefault(node, (set(), [], []))
                    entry[0].update(starved)
                    entry[1].append(event)
                    entry[2].extend(s for s in steps if s.value.origins & starved and s not in entry[2])
        return [(node, frozenset(starved), backwards, steps) for node, (starved, backwards, steps) in found.items()]

    def live(self, value: Value) -> FrozenSet:
        """The origins of `value` that require grad."""
        return value.origins - self.frozen if self.frozen else value.origins

    def _freeze(self, origins: Iterable) -> None:
        for origin in origins:
            if origin not in self.frozen and origin not in self.thawed:
                self.frozen.add(origin)
                self._heap_changed = True

    def _thaw(self, origins: Iterable) -> None:
        """`requires_grad = True` somewhere: frozen only for a while (a GAN's
        discriminator during the generator's step), so trainable."""
        for origin in origins:
            if origin not in self.thawed:
                self.thawed.add(origin)
                self.frozen.discard(origin)
                self._heap_changed = True

    def grad_modes(self, node: cst.CSTNode) -> set:
        return self.grad.get(node, set())

    # Running the file ----------------------------------------------------

    def _run(self) -> None:
        try:
            self._rounds()
        except RecursionError:
            pass  # what ran so far stays recorded; the rest was never seen to run

    def _rounds(self) -> None:
        functions = [f for f in self.index.nodes(cst.FunctionDef)]
        for _ in range(3):  # until the heap's fields settle
            self._heap_changed = False
            self._memo.clear()
            self._memo_events.clear()
            self._memo_modes.clear()
            self._analysed = set()
            self.events = []
            self.dropped = {}
            self.cut_calls = {}
            self.escaped = set()
            self.set_by_hand = set()
            self.grads_read = set()
            self.grads_by_hand = set()
            self.forced = {}
            self.cut_terms = {}
            self.grads_seen = set()
            self.forward_runs = {}
            self.backpropagated = set()
            self.escaped_forwards = set()
            self.module_calls = set()
            self.forward_params = {}
            self.dropped_made = {}
            self.eval_switched = set()
            self._budget = _CALL_BUDGET
            frame = _Frame(None)
            env: dict = {_GRAD_MODE: _mode_value(None)}
            self._block(self.index.module.body, env, frame, None, module_level=True)
            self._globals_now = None  # functions no call reached run on every value a name had
            for function in functions:
                if function in self._analysed or self._budget <= 0:
                    continue
                self._standalone(function)
            if not self._heap_changed:
                break

    def _standalone(self, function: cst.FunctionDef) -> None:
        """A function no call reached: its parameters unknown, its instance
        the summary of its class's instances."""
        receiver = None
        klass = self._class_of_method(function)
        if klass is not None and self.index.instance_param(function) is not None:
            receiver = self._ref(self._summary(klass))
        positional = list(function.params.posonly_params) + list(function.params.params)
        if receiver is not None:
            positional = positional[1:]
        args = []
        for param in positional:
            if param.default is not None:
                break
            args.append(self._symbol(param))
        kwargs = {p.name.value: self._symbol(p) for p in function.params.kwonly_params if p.default is None}
        self._standalone_run = True
        try:
            result = self._call_function(function, receiver, args, kwargs, None, standalone=True)
        finally:
            self._standalone_run = False
        # Unknown callers get what it returns.
        self.escaped_forwards |= graph_of([result]).made_by

    def _symbol(self, param: cst.Param) -> Value:
        obj = self._objects.get((param, None))
        if obj is None:
            obj = self._objects[(param, None)] = Obj(param, SYMBOLIC)
            obj.params = True
        return Value(UNKNOWN, refs=frozenset({obj}), opaque=True)

    # Heap ------------------------------------------------------------------

    def _object(self, site: cst.CSTNode, kind: str, context: object = _NO, **kwargs) -> Obj:
        # One object per site and calling context: the layers two instances
        # of a class build in `__init__` are not the same layers.
        key = (site, self._context() if context is _NO else (context, self._context()))
        obj = self._objects.get(key)
        if obj is None:
            obj = self._objects[key] = Obj(site, kind, **kwargs)
        return obj

    def _summary(self, klass: cst.ClassDef) -> Obj:
        obj = self._summaries.get(klass)
        if obj is None:
            kind = MODULE if self.modules.class_for(klass) is not None else OBJECT
            obj = self._summaries[klass] = Obj(klass, kind, klass=klass)
            obj.params = kind == MODULE and self._own_parameters(klass)
        return obj

    @staticmethod
    def _ref(obj: Obj) -> Value:
        return Value(obj.kind, refs=frozenset({obj}))

    def _store_field(self, obj: Obj, name: str, value: Value) -> None:
        if self._standalone_run or (obj.klass is not None and obj.site is obj.klass):
            # On an object whose users the interpreter has not seen all of.
            self.escaped_forwards |= graph_of([value]).made_by
        old = obj.fields.get(name)
        new = join(old, value)
        if obj.kind == MODULE and old is not None and any(isinstance(r, Obj) and r.kind == MODULE for r in old.refs):
            fresh = {r for r in value.refs if isinstance(r, Obj) and r.kind == MODULE} - set(old.refs)
            if fresh:  # `backbone.fc = nn.Linear(...)`: a new head put in place of a layer, to be trained
                self.grafted |= self.module_closure(Value(MODULE, refs=frozenset(fresh)))
        if new != old:
            obj.fields[name] = new
            self._heap_changed = True
        if obj.kind == MODULE and new.kind == TENSOR and new.origins and self._is_parameter(new):
            obj.params = True

    def _own_parameters(self, klass: cst.ClassDef) -> bool:
        """The module class declares trainable parameters of its own, not only submodules'."""
        module_class = self.modules.class_for(klass)
        return module_class is not None and any(m.trainable and m.kind == "parameter" for m in module_class.members.values())

    def _is_parameter(self, value: Value) -> bool:
        return any(isinstance(o, cst.Call) for o in value.origins)

    def _fields_of(self, obj: Obj, name: str) -> Optional[Value]:
        if obj.klass is not None and obj.site is obj.klass:  # a class summary: every instance
            return join_all(o.fields.get(name) for o in self._instances(obj.klass))
        found = obj.fields.get(name)
        if obj.klass is not None:
            # What methods run on no particular instance stored applies to every one.
            for klass in self._class_chain(obj.klass):
                summary = self._summaries.get(klass)
                if summary is not None and name in summary.fields:
                    found = join(found, summary.fields[name])
        return found

    def _instances(self, klass: cst.ClassDef) -> List[Obj]:
        found = [o for o in self._objects.values() if o.klass is not None and klass in self._class_chain(o.klass)]
        if klass in self._summaries:
            found.append(self._summaries[klass])
        return found

    def _store_element(self, obj: Obj, value: Value, key: object = _NO) -> None:
        if key is not _NO and isinstance(key, (str, int)):
            old = obj.keys.get(key)
            new = join(old, value)
            if new != old:
                obj.keys[key] = new
                self._heap_changed = True
        old = obj.elements
        new = join(old, value)
        if new != old:
            obj.elements = new
            self._heap_changed = True

    def _dropped_at(self, node: cst.CSTNode, default: set) -> set:
        """What the cut at `node` dropped, noting the calls it first ran under."""
        if node not in self.cut_calls:
            calls = self._call_nodes[:-1] if self._call_nodes and self._call_nodes[-1] is node else self._call_nodes
            self.cut_calls[node] = tuple(calls)
        return self.dropped.setdefault(node, default)

    def _cut(self, value: Value, node: cst.CSTNode, kind: str = TENSOR) -> Value:
        # Only what requires grad is dropped: a frozen module's output is data already.
        value = replace(value, origins=self.live(value))
        if value.made_by:
            self.dropped_made.setdefault(node, set()).update(value.made_by)
        if value.origins:
            self._dropped_at(node, set()).update(value.origins)
        return cut(value, node, kind)

    def _graph_or_dropped(self, value: Value) -> set:
        found = set(value.origins)
        for c in value.cuts:
            found |= self.dropped.get(c, set())
        return found

    def _reachable_parameters(self, value: Value, depth: int = 0) -> FrozenSet:
        """The parameters code handed `value` could run a forward of: the
        modules it holds, and those held by the objects and containers it
        holds. Not a tensor's graph: what unknown code returns keeps it."""
        found = set(self.module_closure(value))
        if depth < 3:
            for ref in value.refs:
                if isinstance(ref, Obj) and ref.kind in (OBJECT, CONTAINER):
                    members = list(ref.fields.values()) + list(ref.keys.values()) + ([ref.elements] if ref.elements is not None else [])
                    for member in members:
                        found |= self._reachable_parameters(member, depth + 1)
            for inner in (value.items or ()) + ((value.element,) if value.element is not None else ()):
                found |= self._reachable_parameters(inner, depth + 1)
        return frozenset(found)

    def module_closure(self, value: Value) -> FrozenSet:
        """The module objects `value` holds and their submodules: whose parameters
        `.parameters()` of it yields."""
        seen: set = set()
        stack = [r for r in value.refs if isinstance(r, Obj) and r.kind in (MODULE, SYMBOLIC)]
        while stack:
            obj = stack.pop()
            if obj in seen:
                continue
            seen.add(obj)
            members = list(obj.fields.values())
            if obj.elements is not None:
                members.append(obj.elements)
            for member in members:
                stack.extend(r for r in member.refs if isinstance(r, Obj) and r.kind in (MODULE, SYMBOLIC) and r not in seen)
                if member.kind == TENSOR:
                    seen.update(o for o in member.origins if not isinstance(o, Obj))
            if obj.klass is not None and obj.site is not obj.klass:
                summary = self._summaries.get(obj.klass)
                if summary is not None:
                    stack.append(summary)
        return frozenset(o for o in seen if not isinstance(o, Obj) or o.params)

    # Functions and classes ---------------------------------------------------

    def _class_of_method(self, function: cst.FunctionDef) -> Optional[cst.ClassDef]:
        if not self.index.is_method(function):
            return None
        return self.index.parent(self.index.parent(function))  # type: ignore[return-value]

    def class_chain(self, klass: cst.ClassDef) -> List[cst.ClassDef]:
        """The class and its bases defined in the file, nearest first."""
        return self._class_chain(klass)

    def _class_chain(self, klass: cst.ClassDef, depth: int = 0) -> List[cst.ClassDef]:
        chain = [klass]
        if depth > 8:
            return chain
        for base in klass.bases:
            found = self._file_class(base.value)
            if found is not None and found is not klass:
                chain.extend(self._class_chain(found, depth + 1))
        return chain

    def _file_class(self, expr: cst.BaseExpression) -> Optional[cst.ClassDef]:
        if isinstance(expr, cst.Name):
            value = self.globals.get(expr.value)
            if value is not None:
                for ref in value.refs:
                    if isinstance(ref, cst.ClassDef):
                        return ref
            for node in self.index.nodes(cst.ClassDef):
                if node.name.value == expr.value and self.index.scope_of(node) is self.index.module:
                    return node
        return None

    def _method(self, klass: cst.ClassDef, name: str) -> Optional[cst.FunctionDef]:
        for owner in self._class_chain(klass):
            for statement in owner.body.body:
                if isinstance(statement, cst.FunctionDef) and statement.name.value == name:
                    return statement
        return None

    def _decorated(self, function: cst.FunctionDef) -> Tuple[Optional[bool], set]:
        """Grad mode a function's decorators set, and their plain names."""
        mode = None
        plain = set()
        for decorator in function.decorators:
            expr = decorator.decorator
            target = expr.func if isinstance(expr, cst.Call) else expr
            qualified = self.names.qualified(target)
            if qualified in _NO_GRAD:
                mode = False
            elif qualified == "torch.enable_grad":
                mode = True
            elif self._applies_no_grad(target):
                mode = False
            else:
                name = dotted(target)
                if name is not None:
                    plain.add(name.rsplit(".", 1)[-1])
        return mode, plain

    def _applies_no_grad(self, target: cst.BaseExpression) -> bool:
        """A decorator the file defines that runs the function it wraps with
        autograd off: it applies `torch.no_grad()` or `inference_mode()` to it
        (`(torch.inference_mode if new else torch.no_grad)()(fn)`), or calls it
        inside `with torch.no_grad():`. Read from its code, whatever its name."""
        value = self.globals.get(target.value) if isinstance(target, cst.Name) else None
        functions = [r for r in (value.refs if value is not None else ()) if isinstance(r, cst.FunctionDef)]
        for function in functions:
            for call in self.index.descendants(function, cst.Call):
                head = call.func
                if not isinstance(head, cst.Call):
                    continue
                made = head.func
                options = [made.body, made.orelse] if isinstance(made, cst.IfExp) else [made]
                if all(self.names.qualified(o) in _NO_GRAD for o in options):
                    return True
            for block in self.index.descendants(function, cst.With):
                managers = [item.item.func if isinstance(item.item, cst.Call) else item.item for item in block.items]
                if any(self.names.qualified(m) in _NO_GRAD for m in managers) and any(True for _ in self.index.descendants(block.body, cst.Call)):
                    return True
        return False

    def _call_function(
        self,
        function: cst.CSTNode,
        receiver: Optional[Value],
        args: Sequence[Value],
        kwargs: Dict[str, Value],
        grad: Optional[bool],
        standalone: bool = False,
    ) -> Value:
        self._analysed.add(function)
        key = (function, receiver, tuple(args), tuple(sorted(kwargs.items())), grad)
        if key in self._memo:
            # The call runs again: its steps, zeroings and backwards happen
            # again, in order, for the queries that read their sequence.
            if len(self.events) < _EVENT_CAP:
                self.events.extend(self._memo_events.get(key, ()))
            if self._memo_modes.get(key, _NO) is not _NO:
                self._grad_change = self._memo_modes[key]
            return self._memo[key]
        # A method re-entered on the same object with other arguments (a
        # `forward` that runs every module of `self.modules()`, itself
        # included) is followed once, never unrolled.
        reentry = (function, receiver) if receiver is not None else None
        if reentry is not None and reentry in self._reentered and key not in self._active:
            # What it returns depends on its arguments and the object's own parameters.
            out = graph_of(list(args) + list(kwargs.values()), UNKNOWN)
            return replace(out, origins=out.origins | self.module_closure(receiver), opaque=True)
        if key in self._active or self._depth >= _DEPTH or self._budget <= 0:
            return UNKNOWN_VALUE
        self._budget -= 1
        self._active.add(key)
        if reentry is not None:
            self._reentered.add(reentry)
        self._depth += 1
        self._calls.append(self._contexts.setdefault(key, len(self._contexts)))
        first = len(self.events)
        pending, mode_now = self._grad_change, self._mode_now
        try:
            result, left = self._interpret_function(function, receiver, list(args), kwargs, grad)
        finally:
            self._calls.pop()
            self._depth -= 1
            self._active.discard(key)
            self._reentered.discard(reentry)
        # A `set_grad_enabled(flag)` the callee did not undo stays in force in its caller.
        self._grad_change = left if left is not _NO else pending
        self._mode_now = mode_now
        self._memo_modes[key] = left
        self._memo[key] = result
        self._memo_events[key] = [e for e in self.events[first:] if e.kind in _SEQUENCED]
        return result

    def _interpret_function(self, function, receiver, args, kwargs, grad) -> Tuple[Value, object]:
        """What the call returns, and the grad mode it leaves (`_NO`: the one it found)."""
        env: dict = dict(self._closures.get(function, {}))
        if isinstance(function, cst.Lambda):
            env.pop(_GRAD_MODE, None)
            self._bind_params(function.params, receiver, args, kwargs, env)
            return self._expr(function.body, env, grad), _NO
        entry = grad
        mode, plain = self._decorated(function)
        if mode is not None:
            grad = mode
        env[_GRAD_MODE] = _mode_value(grad)
        if "staticmethod" in plain:
            receiver = None
        elif "classmethod" in plain and receiver is not None:
            receiver = UNKNOWN_VALUE
        self._bind_params(function.params, receiver, args, kwargs, env)
        frame = _Frame(function)
        body = function.body.body if isinstance(function.body, cst.IndentedBlock) else function.body.body
        end = self._block(body, env, frame, grad)
        result = frame.returns
        if end is not None:
            result = join(result, constant(None))
            frame.exit_modes.append(end.get(_GRAD_MODE, _NO))
        elif result is None:
            return UNKNOWN_VALUE, _NO  # every path raises (an abstract method): what overrides return is not known
        left = _left_mode(frame.exit_modes, entry) if mode is None else _NO  # a decorator restores the mode
        if any(isinstance(n, (cst.Yield,)) for n in self.index.descendants(function.body, cst.Yield)):
            return Value(ITERATOR, element=UNKNOWN_VALUE), left
        return (result if result is not None else constant(None)), left

    def _bind_params(self, params: cst.Parameters, receiver, args, kwargs, env) -> None:
        positional = list(params.posonly_params) + list(params.params)
        if receiver is not None and positional:
            env[positional[0].name.value] = receiver
            positional = positional[1:]
        rest = list(args)
        for param in positional:
            name = param.name.value
            if rest:
                env[name] = rest.pop(0)
            elif name in kwargs:
                env[name] = kwargs[name]
            elif param.default is not None:
                env[name] = self._expr(param.default, dict(self.globals), None)
            else:
                env[name] = UNKNOWN_VALUE
        for param in params.kwonly_params:
            name = param.name.value
            if name in kwargs:
                env[name] = kwargs[name]
            elif param.default is not None:
                env[name] = self._expr(param.default, dict(self.globals), None)
            else:
                env[name] = UNKNOWN_VALUE
        if isinstance(params.star_arg, cst.Param):
            env[params.star_arg.name.value] = Value(TUPLE, items=tuple(rest)) if rest else UNKNOWN_VALUE
        if isinstance(params.star_kwarg, cst.Param):
            env[params.star_kwarg.name.value] = UNKNOWN_VALUE
        for param in list(params.posonly_params) + list(params.params) + list(params.kwonly_params):
            bound = env.get(param.name.value)
            if bound is not None:  # what each parameter was bound to, over every call
                old = self.values.get(param.name)
                self.values[param.name] = bound if old is None else join(old, bound)

    def holds_module(self, node: cst.CSTNode) -> Optional[bool]:
        """Whether `node` (an expression or a parameter's name) was seen to hold
        a module built by the program, in every context it ran in; None when it
        was not seen or holds something the interpreter cannot tell."""
        value = self.values.get(node)
        if value is None or value.opaque or not value.refs:
            return None
        kinds = {r.kind for r in value.refs if isinstance(r, Obj)}
        if kinds == {MODULE}:
            return True
        if not kinds or SYMBOLIC in kinds or MODULE in kinds:
            return None
        return False

    def holds_optimizer(self, node: cst.CSTNode) -> bool:
        """Whether `node` was seen to hold, in every context, an optimizer the program built."""
        value = self.values.get(node)
        if value is None or value.opaque:
            return False
        kinds = {r.kind for r in value.refs if isinstance(r, Obj)}
        return kinds == {OPTIMIZER}

    def holds_torch_loss(self, node: cst.CSTNode) -> bool:
        """Whether every module `node` holds is one of torch's loss classes (`nn.MSELoss()`)."""
        value = self.values.get(node)
        objects = [r for r in (value.refs if value is not None else ()) if isinstance(r, Obj)]
        return bool(objects) and all(o.kind == MODULE and (o.qualified or "").startswith("torch.nn.") and o.qualified.endswith("Loss") for o in objects)

    # Statements --------------------------------------------------------------

    def _block(self, statements, env: Optional[dict], frame: _Frame, grad: Optional[bool], module_level: bool = False) -> Optional[dict]:
        for statement in statements:
            if env is None:
                return None
            if module_level:
                self._globals_now = env
            env = self._statement(statement, env, frame, _mode(env, grad), module_level)
        return env

    def _body(self, suite) -> Sequence:
        return suite.body

    def _statement(self, node, env: dict, frame: _Frame, grad, module_level: bool) -> Optional[dict]:
        if isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            for small in node.body:
                if env is None:
                    return None
                self._grad_change = _NO
                self._mode_now = env.get(_GRAD_MODE)
                env = self._small(small, env, frame, _mode(env, grad), module_level)
                if env is not None and self._grad_change is not _NO:
                    env[_GRAD_MODE] = self._grad_change
            return env
        if isinstance(node, cst.If):
            test = self._expr(node.test, env, grad)
            truth = _truth(test)
            then = self._block(node.body.body, dict(env), frame, grad, module_level) if truth is not False else None
            if node.orelse is None:
                other = dict(env) if truth is not True else None
            elif isinstance(node.orelse, cst.If):
                other = self._statement(node.orelse, dict(env), frame, grad, module_level) if truth is not True else None
            else:
                other = self._block(node.orelse.body.body, dict(env), frame, grad, module_level) if truth is not True else None
            return _join_env(then, other)
        if isinstance(node, (cst.For, cst.While)):
            return self._loop(node, env, frame, grad, module_level)
        if isinstance(node, cst.With):
            inner = grad
            for item in node.items:
                value = self._expr(item.item, env, grad)
                mode = self._grad_manager(item.item, env, grad)
                if mode is not _NO:
                    inner = mode
                entered = self._enter(item.item, value, grad)
                if entered is not None:
                    value = entered
                if item.asname is not None:
                    self._assign(item.asname.name, value, env, grad, module_level)
            self._grad_change = _NO
            # Leaving a grad-mode manager restores the mode it found.
            outer = env.get(_GRAD_MODE, _NO)
            if inner is not grad:
                env[_GRAD_MODE] = _mode_value(inner)
            frame.restores.append(outer)
            try:
                after = self._block(node.body.body, env, frame, inner, module_level)
            finally:
                frame.restores.pop()
            if after is not None and inner is not grad:
                after.pop(_GRAD_MODE, None)
                if outer is not _NO:
                    after[_GRAD_MODE] = outer
            return after
        if isinstance(node, cst.Try) or type(node).__name__ == "TryStar":
            before = dict(env)
            after = self._block(node.body.body, dict(env), frame, grad, module_level)
            entry = _join_env(before, after)
            ends = []
            for handler in node.handlers:
                start = dict(entry) if entry is not None else dict(before)
                if handler.type is not None:
                    self._expr(handler.type, start, grad)
                if handler.name is not None:
                    self._assign(handler.name.name, UNKNOWN_VALUE, start, grad, module_level)
                ends.append(self._block(handler.body.body, start, frame, grad, module_level))
            if node.orelse is not None and after is not None:
                after = self._block(node.orelse.body.body, after, frame, grad, module_level)
            result = after
            for end in ends:
                result = _join_env(result, end)
            if node.finalbody is not None:
                final_start = result if result is not None else dict(entry or before)
                final = self._block(node.finalbody.body.body, dict(final_start), frame, grad, module_level)
                result = final if result is not None else None
            return result
        if isinstance(node, cst.FunctionDef):
            for decorator in node.decorators:
                self._expr(decorator.decorator, env, grad)
            if not module_level and frame.function is not None:
                self._closures[node] = _join_env(self._closures.get(node), env) or {}
            self._assign(node.name, Value(FUNCTION, refs=frozenset({node})), env, grad, module_level)
            return env
        if isinstance(node, cst.ClassDef):
            for base in node.bases:
                self._expr(base.value, env, grad)
            class_env: dict = dict(env)
            for statement in node.body.body:
                if isinstance(statement, (cst.SimpleStatementLine,)):
                    class_env = self._statement(statement, class_env, _Frame(None), grad, False) or class_env
            self._assign(node.name, Value(FUNCTION, refs=frozenset({node})), env, grad, module_level)
            return env
        if type(node).__name__ == "Match":
            self._expr(node.subject, env, grad)
            result = None
            for case in node.cases:
                result = _join_env(result, self._block(case.body.body, dict(env), frame, grad, module_level))
            return _join_env(result, env)
        return env

    def _enter(self, node, manager: Value, grad) -> Optional[Value]:
        """What `with obj as x` binds: `obj.__enter__()` for the file's classes."""
        result = None
        for ref in manager.refs:
            if isinstance(ref, Obj) and ref.klass is not None:
                method = self._method(ref.klass, "__enter__")
                if method is not None:
                    result = join(result, self._call_function(method, self._ref(ref), [], {}, grad))
        return result

    def _grad_manager(self, expr: cst.BaseExpression, env: dict, grad) -> object:
        """The grad mode a `with` item enters, `_NO` when it is no grad-mode manager."""
        if isinstance(expr, cst.IfExp):  # `with (torch.enable_grad() if train else torch.no_grad()):`
            truth = _truth(self._expr(expr.test, env, grad))
            if truth is not None:
                return self._grad_manager(expr.body if truth else expr.orelse, env, grad)
            modes = {self._grad_manager(expr.body, env, grad), self._grad_manager(expr.orelse, env, grad)}
            return modes.pop() if len(modes) == 1 else None
        target = expr.func if isinstance(expr, cst.Call) else expr
        qualified = self.names.qualified(target)
        if qualified in _NO_GRAD:
            if qualified == "torch.inference_mode" and isinstance(expr, cst.Call) and expr.args:
                flag = _truth(self.values.get(expr.args[0].value, UNKNOWN_VALUE))
                return None if flag is None else not flag
            return False
        if qualified == "torch.enable_grad":
            return True
        if qualified == "torch.set_grad_enabled" and isinstance(expr, cst.Call) and expr.args:
            return _truth(self.values.get(expr.args[0].value, UNKNOWN_VALUE))
        return _NO

    def _loop(self, node, env: dict, frame: _Frame, grad, module_level: bool) -> Optional[dict]:
        element = None
        if isinstance(node, cst.For):
            element = self.element_of(self._expr(node.iter, env, grad))
        head = dict(env)
        exits: List[dict] = []
        end = None
        passed = None  # the state after some pass of the body
        for _ in range(_LOOP_PASSES):
            breaks: List[dict] = []
            continues: List[dict] = []
            frame.loops.append((breaks, continues))
            frame.loop_restores.append(len(frame.restores))
            state = dict(head)
            if isinstance(node, cst.For):
                self._assign(node.target, element, state, grad, module_level)
            else:
                truth = _truth(self._expr(node.test, state, grad))
                if truth is False:
                    frame.loops.pop()
                    frame.loop_restores.pop()
                    break
            end = self._block(node.body.body, state, frame, grad, module_level)
            frame.loops.pop()
            frame.loop_restores.pop()
            for cont in continues:
                end = _join_env(end, cont)
            exits = breaks
            passed = _join_env(passed, end)
            new_head = _join_env(head, end)
            if new_head == head:
                break
            head = new_head
        after = head
        if self._runs_once(node, env):
            after = passed  # never left before its first pass
        if node.orelse is not None and after is not None:
            after = self._block(node.orelse.body.body, dict(after), frame, grad, module_level)
        for exit_env in exits:
            after = _join_env(after, exit_env)
        if isinstance(node, cst.While) and _truth(self.values.get(node.test, UNKNOWN_VALUE)) is True and not exits:
            return None  # `while True:` left only by `break` or `return`
        return after

    def _runs_once(self, node, env: dict) -> bool:
        """A `for` over `range(n)` with `n` known positive, or over a literal with items."""
        if not isinstance(node, cst.For):
            return False
        it = node.iter
        if isinstance(it, (cst.List, cst.Tuple)):
            return bool(it.elements) and not any(isinstance(e, cst.StarredElement) for e in it.elements)
        callee = self.values.get(it.func) if isinstance(it, cst.Call) else None
        if callee is not None and callee.const == "builtins.range" and 1 <= len(it.args) <= 3:
            bounds = [self.values.get(arg.value, UNKNOWN_VALUE).const for arg in it.args]
            if all(type(b) is int for b in bounds):
                return len(range(*bounds)) > 0
        return False

    def _small(self, node, env: dict, frame: _Frame, grad, module_level: bool) -> Optional[dict]:
        if isinstance(node, cst.Assign):
            value = self._expr(node.value, env, grad)
            for target in node.targets:
                if _grad_of(target.target) is not None and _grad_of(node.value) is not None:
                    # `shared._grad = local.grad`: a worker's gradients, computed to be copied.
                    source = self.values.get(_grad_of(node.value))
                    if source is not None:
                        self.grads_read |= self.live(source)
                if _adds_to_itself(target.target, node.value):  # `self.sum = self.sum + val`
                    self._accumulate_in_holder(node, target.target, [value], env, grad)
                self._assign(target.target, value, env, grad, module_level)
            return env
        if isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self._assign(node.target, self._expr(node.value, env, grad), env, grad, module_level)
            return env
        if isinstance(node, cst.AugAssign):
            current = self._expr(node.target, env, grad)
            value = self._expr(node.value, env, grad)
            if current.leaf and current.kind == TENSOR and grad is not False and self.live(current) and not current.opaque:
                self._event("leaf_edit", node, current, grad)  # `p -= lr * p.grad` outside no_grad raises
            if isinstance(node.operator, (cst.AddAssign, cst.SubtractAssign, cst.MultiplyAssign, cst.DivideAssign)):
                self._accumulate(node, current, [value], grad)  # in place on a tensor
                self._accumulate_in_holder(node, node.target, [value], env, grad)
            result = self._arithmetic(current, value, grad, node)
            self._assign(node.target, result, env, grad, module_level, augmented=True)
            return env
        if isinstance(node, cst.Expr):
            self._expr(node.value, env, grad)
            return env
        if isinstance(node, cst.Return):
            value = self._expr(node.value, env, grad) if node.value is not None else constant(None)
            frame.returns = join(frame.returns, value)
            # Leaving through `with` blocks restores the mode the outermost one found.
            left = frame.restores[0] if frame.restores else self._grad_change if self._grad_change is not _NO else env.get(_GRAD_MODE, _NO)
            frame.exit_modes.append(left)
            return None
        if isinstance(node, cst.Raise):
            if node.exc is not None:
                self._expr(node.exc, env, grad)
            return None
        if isinstance(node, cst.Break):
            if frame.loops:
                frame.loops[-1][0].append(_restored(env, frame))
            return None
        if isinstance(node, cst.Continue):
            if frame.loops:
                frame.loops[-1][1].append(_restored(env, frame))
            return None
        if isinstance(node, cst.Assert):
            self._expr(node.test, env, grad)
            return env
        if isinstance(node, cst.Del):
            return env
        return env

    def _assign(self, target, value: Value, env: dict, grad, module_level: bool, augmented: bool = False) -> None:
        self.values[target] = join(self.values.get(target), value)
        if isinstance(target, cst.Name):
            env[target.value] = value
            if module_level:
                self.globals[target.value] = join(self.globals.get(target.value), value) if target.value in self.globals else value
            return
        if isinstance(target, cst.Attribute):
            base = self._expr(target.value, env, grad)
            if target.attr.value == "requires_grad" and base.kind in (TENSOR, UNKNOWN):
                if _truth(value) is False:
                    self._freeze(base.origins)
                elif _truth(value) is True:
                    self._thaw(base.origins)
                    if not base.origins and isinstance(target.value, (cst.Name, cst.Attribute)):
                        self._note_forced(target, base)
                        # A tensor made a leaf that requires grad, graph or not.
                        self._assign(target.value, replace(base, kind=TENSOR, origins=frozenset({target}), leaf=True), env, grad, module_level)
            if target.attr.value in ("grad", "_grad") and base.kind in (TENSOR, UNKNOWN):
                if not (value.kind == NUMBER and value.const is None):
                    self.set_by_hand |= base.origins  # gradients handed in by hand (`p.grad = q.grad`), not cleared
                self.grads_by_hand |= base.origins
            if value.kind == TENSOR and any(isinstance(o, Obj) for o in value.origins):
                # `trg.weight = src.weight`: tied to another module's parameter.
                self.set_by_hand |= {r for r in base.refs if isinstance(r, Obj) and r.kind == MODULE and r not in value.origins}
            for ref in base.refs:
                if isinstance(ref, Obj):
                    self._store_field(ref, target.attr.value, value)
            return
        if isinstance(target, cst.Subscript):
            base = self._expr(target.value, env, grad)
            if base.leaf and base.kind == TENSOR and grad is not False and self.live(base) and not base.opaque and not augmented:
                self._event("leaf_edit", target, base, grad)  # `w[0] = v`: an in-place write into a leaf
            key = _NO
            if len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index):
                key = self._expr(target.slice[0].slice.value, env, grad).const
            for ref in base.refs:
                if isinstance(ref, Obj) and ref.kind == CONTAINER:
                    self._store_element(ref, value, key)
                    if key is _NO:  # a new slot each pass (`log[step] = loss`)
                        self._accumulate(target, self._ref(ref), [value], grad)
            return
        if isinstance(target, (cst.Tuple, cst.List)):
            elements = target.elements
            star = next((i for i, e in enumerate(elements) if isinstance(e, cst.StarredElement)), None)
            for i, element in enumerate(elements):
                if value.items is not None and star is None and len(value.items) == len(elements):
                    part = value.items[i]
                elif value.items is not None and star is not None and i < star and i < len(value.items):
                    part = value.items[i]
                elif isinstance(element, cst.StarredElement):
                    part = Value(CONTAINER) if value.kind != UNKNOWN else UNKNOWN_VALUE
                else:
                    part = self.element_of(value)
                inner = element.value
                self._assign(inner, part, env, grad, module_level)
            return
        if isinstance(target, cst.StarredElement):
            self._assign(target.value, UNKNOWN_VALUE, env, grad, module_level)

    # Expressions ---------------------------------------------------------------

    def _expr(self, node, env: dict, grad) -> Value:
        if self._grad_change is not _NO:  # a call earlier in the statement changed it
            grad = _truth(self._grad_change)
        value = self._evaluate(node, env, grad)
        old = self.values.get(node)
        self.values[node] = value if old is None else join(old, value)
        return value

    def _evaluate(self, node, env: dict, grad) -> Value:
        kind = type(node)
        if kind is cst.Name:
            return self._name(node, env)
        if kind is cst.Attribute:
            return self._attribute(node, env, grad)
        if kind is cst.Call:
            return self._call(node, env, grad)
        if kind in (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString):
            try:
                return constant(node.evaluated_value)
            except Exception:  # noqa: BLE001 - an odd literal is still a number
                return A_NUMBER
        if kind in (cst.ConcatenatedString, cst.FormattedString):
            for part in self.index.descendants(node, cst.FormattedStringExpression):
                self._expr(part.expression, env, grad)
            return A_NUMBER
        if kind is cst.BinaryOperation:
            left = self._expr(node.left, env, grad)
            right = self._expr(node.right, env, grad)
            return self._arithmetic(left, right, grad, node)
        if kind is cst.UnaryOperation:
            inner = self._expr(node.expression, env, grad)
            if isinstance(node.operator, cst.Not):
                truth = _truth(inner)
                return constant(not truth) if truth is not None else A_NUMBER
            if inner.kind == NUMBER:
                try:
                    return constant(-inner.const) if isinstance(node.operator, cst.Minus) and isinstance(inner.const, (int, float)) else A_NUMBER
                except Exception:  # noqa: BLE001
                    return A_NUMBER
            return graph_of([inner], inner.kind if inner.kind in (TENSOR, UNKNOWN) else UNKNOWN)
        if kind is cst.BooleanOperation:
            left = self._expr(node.left, env, grad)
            right = self._expr(node.right, env, grad)
            truth = _truth(left)
            if isinstance(node.operator, cst.And):
                return right if truth is True else left if truth is False else join(left, right)
            return left if truth is True else right if truth is False else join(left, right)
        if kind is cst.Comparison:
            left = self._expr(node.left, env, grad)
            rights = [self._expr(comparison.comparator, env, grad) for comparison in node.comparisons]
            return self._compare(node, left, rights)
        if kind is cst.IfExp:
            test = _truth(self._expr(node.test, env, grad))
            body = self._expr(node.body, env, grad) if test is not False else None
            other = self._expr(node.orelse, env, grad) if test is not True else None
            return join(body, other) or UNKNOWN_VALUE
        if kind is cst.Tuple:
            return Value(TUPLE, items=tuple(self._element(e, env, grad) for e in node.elements))
        if kind in (cst.List, cst.Set):
            obj = self._object(node, CONTAINER)
            for i, element in enumerate(node.elements):
                value = self._element(element, env, grad)
                self._store_element(obj, value)
                if kind is cst.List and isinstance(element, cst.Element):
                    self._store_element(obj, value, i)
            return self._ref(obj)
        if kind is cst.Dict:
            obj = self._object(node, CONTAINER)
            for element in node.elements:
                if isinstance(element, cst.DictElement):
                    key = self._expr(element.key, env, grad)
                    self._store_element(obj, self._expr(element.value, env, grad), key.const)
                else:
                    self._expr(element.value, env, grad)
            return self._ref(obj)
        if kind in (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp):
            return self._comprehension(node, env, grad)
        if kind is cst.Subscript:
            return self._subscript(node, env, grad)
        if kind is cst.Lambda:
            self._closures[node] = _join_env(self._closures.get(node), env) or {}
            return Value(FUNCTION, refs=frozenset({node}))
        if kind is cst.NamedExpr:
            value = self._expr(node.value, env, grad)
            self._assign(node.target, value, env, grad, False)
            return value
        if kind is cst.Await:
            return self._expr(node.expression, env, grad)
        if kind is cst.Yield:
            if node.value is not None and isinstance(node.value, cst.BaseExpression):
                self.escaped_forwards |= graph_of([self._expr(node.value, env, grad)]).made_by
            return UNKNOWN_VALUE
        if kind is cst.Ellipsis:
            return A_NUMBER
        for child in _expression_children(node):
            self._expr(child, env, grad)
        return UNKNOWN_VALUE

    def _context(self) -> object:
        return self._calls[-1] if self._calls else None

    def _element(self, element, env, grad) -> Value:
        value = self._expr(element.value, env, grad)
        if isinstance(element, cst.StarredElement):
            return self.element_of(value)
        return value

    def _name(self, node: cst.Name, env: dict) -> Value:
        name = node.value
        if name in env:
            return env[name]
        if self._globals_now is not None and name in self._globals_now:
            return self._globals_now[name]
        if name in self.globals:
            return self.globals[name]
        qualified = self.names.qualified(node)
        if qualified is not None:
            return Value(EXTERNAL, const=qualified)
        if name in ("True", "False", "None"):
            return constant({"True": True, "False": False, "None": None}[name])
        return Value(EXTERNAL, const=f"builtins.{name}")

    def _attribute(self, node: cst.Attribute, env: dict, grad) -> Value:
        base = self._expr(node.value, env, grad)
        attr = node.attr.value
        if base.kind == EXTERNAL and isinstance(base.const, str):
            return Value(EXTERNAL, const=self.names.qualified(node) or f"{base.const}.{attr}")
        found: Optional[Value] = None
        tensorish = False
        for ref in base.refs:
            if isinstance(ref, Obj) and ref.kind == STORAGE:
                continue  # a tensor's: its attributes are the tensor's
            if isinstance(ref, Obj) and ref.kind == SYMBOLIC:
                found = join(found, self._symbolic_attribute(ref, attr))
                continue
            if isinstance(ref, Obj):
                field_value = self._fields_of(ref, attr)
                if field_value is not None:
                    found = join(found, field_value)
                    if ref.klass is None or self._method(ref.klass, attr) is None:
                        continue
                    # A method replaced by assignment (`obj.process = wrapper`): read before it, too.
                if ref.klass is not None:
                    method = self._method(ref.klass, attr)
                    if method is not None:
                        _, plain = self._decorated(method)
                        if "property" in plain or "cached_property" in plain:
                            found = join(found, self._call_function(method, self._ref(ref), [], {}, grad))
                        else:
                            found = join(found, Value(FUNCTION, refs=frozenset({Bound(method, self._ref(ref))})))
                        continue
                if ref.kind == MODULE and attr in ("weight", "bias"):
                    found = join(found, Value(TENSOR, origins=frozenset({ref}), leaf=True))
                    continue
                if ref.kind == CONTAINER:
                    found = join(found, Value(FUNCTION, refs=frozenset({("method", attr, ref)})))
                    continue
                found = join(found, Value(FUNCTION, refs=frozenset({("method", attr, ref)})))
            elif isinstance(ref, cst.ClassDef):
                method = self._method(ref, attr)
                if method is not None:
                    found = join(found, Value(FUNCTION, refs=frozenset({method})))
            elif isinstance(ref, tuple) and ref[0] == "super":
                _, klass, receiver = ref
                method = next((m for base in self._class_chain(klass)[1:] for m in (self._method(base, attr),) if m is not None), None)
                bound = Bound(method, receiver) if method is not None else ("inherited", attr, receiver)
                found = join(found, Value(FUNCTION, refs=frozenset({bound})))
        if base.kind in (TENSOR, UNKNOWN) and not found:
            tensorish = True
        if tensorish:
            if attr == "data" and base.kind == TENSOR:
                return self._cut(base, node)
            if attr == "data":  # a tensor's storage, or a field (a PackedSequence's): not known
                return replace(self._cut(replace(base, opaque=True), node), kind=UNKNOWN, opaque=True)
            if attr in ("grad", "_grad"):
                self.grads_seen |= base.origins  # gradients the program reads
            if attr in ("grad", "_grad"):
                # No graph unless a backward ran with `create_graph=True` (a Hessian's).
                return replace(self._cut(base, node, TENSOR), opaque=True)
            if attr in NO_GRAPH_ATTRIBUTES or attr in TENSOR_METADATA:
                return self._cut(base, node, TENSOR if attr == "grad" else NUMBER)
            if attr in ("T", "mT", "H", "real", "imag"):
                return graph_of([base], base.kind)
            if base.kind == TENSOR:
                return Value(FUNCTION, refs=frozenset({("tensor_method", attr, base)}))
            # `outputs.loss` of an unknown output: a method when called, else
            # a member that may carry the output's graph.
            return Value(UNKNOWN, base.origins, base.cuts, refs=frozenset({("method", attr, base)}), opaque=True, made_by=base.made_by)
        if base.kind == OPTIMIZER and attr == "param_groups":
            owns = join_all(Value(TENSOR, origins=r.owns) for r in base.refs if isinstance(r, Obj))
            return Value(CONTAINER, element=UNKNOWN_VALUE, items=None, refs=_EMPTY) if owns is None else Value(ITERATOR, element=UNKNOWN_VALUE)
        return found or Value(FUNCTION, refs=frozenset({("method", attr, base)}))

    def _definers(self) -> Dict[str, List[cst.ClassDef]]:
        """Each method name of the file's classes, and the classes defining it."""
        if self._method_names is None:
            self._method_names = {}
            for klass in self.index.nodes(cst.ClassDef):
                for statement in klass.body.body:
                    if isinstance(statement, cst.FunctionDef):
                        self._method_names.setdefault(statement.name.value, []).append(klass)
        return self._method_names

    def _symbolic_attribute(self, obj: Obj, attr: str) -> Value:
        """`m.encoder`, `m.parameters`, `x.shape` of an unknown object."""
        if attr in GRAPH_CUTTING_ATTRIBUTES or attr in TENSOR_METADATA:
            return UNKNOWN_VALUE
        if attr in PARAMETER_ITERATORS or attr in MODULE_RETURNING_SELF or attr in MODULE_API or attr in DETACHING_METHODS or attr in TO_PYTHON_METHODS or attr in NO_GRAPH_METHODS or attr == "backward":
            return Value(FUNCTION, refs=frozenset({("method", attr, obj)}))
        klass = duck_typed(attr, self._definers().get(attr, []))
        if klass is not None:
            method = self._method(klass, attr)
            return Value(FUNCTION, refs=frozenset({Bound(method, self._ref(self._summary(klass)))}))  # type: ignore[arg-type]
        member = obj.fields.get(attr)
        if member is None:
            child = Obj(obj.site, SYMBOLIC)
            child.params = True
            child.root = obj.root
            member = obj.fields[attr] = Value(UNKNOWN, refs=frozenset({child}), opaque=True)
        return member

    def _subscript(self, node: cst.Subscript, env: dict, grad) -> Value:
        base = self._expr(node.value, env, grad)
        keys = []
        for element in node.slice:
            if isinstance(element.slice, cst.Index):
                keys.append(self._expr(element.slice.value, env, grad))
            else:
                for part in (element.slice.lower, element.slice.upper, element.slice.step):
                    if part is not None:
                        self._expr(part, env, grad)
                keys.append(None)
        key = keys[0].const if len(keys) == 1 and keys[0] is not None else _NO
        if base.items is not None:
            if isinstance(key, int) and -len(base.items) <= key < len(base.items):
                return base.items[key]
            if keys == [None]:
                return Value(TUPLE, items=None, element=join_all(base.items)) if base.items else base
            return join_all(base.items) or UNKNOWN_VALUE
        if base.kind in (TENSOR, UNKNOWN) and not any(isinstance(r, Obj) and r.kind != STORAGE for r in base.refs):
            if base.kind == UNKNOWN and base.element is not None:
                return base.element
            out = replace(graph_of([base], base.kind), leaf=base.leaf)  # `w[0]`: a view of `w`
            # Rows picked by a tensor index (`x[mask]`, `x[idx]`) depend on the
            # cuts that index passed: a router's `argmax` decides what trains.
            picked = frozenset().union(*(k.cuts for k in keys if k is not None and k.kind == TENSOR))
            return replace(out, cuts=out.cuts | picked) if picked else out
        found = None
        for ref in base.refs:
            if isinstance(ref, Obj):
                if ref.kind == CONTAINER:
                    if key is not _NO and key in ref.keys:
                        found = join(found, ref.keys[key])
                    elif keys == [None]:
                        found = join(found, base)
                    else:
                        found = join(found, ref.elements or UNKNOWN_VALUE)
                elif ref.kind == MODULE:
                    found = join(found, ref.elements or UNKNOWN_VALUE)
        if found is None and base.element is not None:
            return base.element
        return found or UNKNOWN_VALUE

    def _comprehension(self, node, env: dict, grad) -> Value:
        inner = dict(env)
        for_in = node.for_in
        while for_in is not None:
            element = self.element_of(self._expr(for_in.iter, inner, grad))
            self._assign(for_in.target, element, inner, grad, False)
            for condition in for_in.ifs:
                self._expr(condition.test, inner, grad)
            for_in = for_in.inner_for_in
        if isinstance(node, cst.DictComp):
            key = self._expr(node.key, inner, grad)
            value = self._expr(node.value, inner, grad)
            obj = self._object(node, CONTAINER)
            self._store_element(obj, value)
            return self._ref(obj)
        value = self._expr(node.elt, inner, grad)
        if isinstance(node, cst.GeneratorExp):
            return Value(ITERATOR, element=value)
        obj = self._object(node, CONTAINER)
        self._store_element(obj, value)
        return self._ref(obj)

    def element_of(self, value: Value) -> Value:
        """What iterating `value` gives."""
        if value.items is not None:
            return join_all(value.items) or UNKNOWN_VALUE
        if value.element is not None:
            return value.element
        found = None
        for ref in value.refs:
            if isinstance(ref, Obj) and ref.kind in (CONTAINER, MODULE):
                found = join(found, ref.elements)
        if found is not None:
            return found
        if value.kind == TENSOR:
            return graph_of([value])
        if value.kind == NUMBER:
            return A_NUMBER
        return UNKNOWN_VALUE

    def _arithmetic(self, left: Value, right: Value, grad, node) -> Value:
        additive = isinstance(getattr(node, "operator", None), (cst.Add, cst.Subtract, cst.AddAssign, cst.SubtractAssign))
        if additive and grad is not False:
            for term, rest in ((left, right), (right, left)):
                # Cut into a number or a new tensor (`.item()`, NumPy, `torch.tensor(...)`, `argmax`), not a
                # `detach()`: a detached term in a sum is a stop-gradient on purpose (straight-through, a target).
                cut_here = frozenset(
                    c
                    for c in term.cuts
                    if (term.kind in (NUMBER, ARRAY) or self.cut_into_value(c)) and self.live(Value(origins=frozenset(self.dropped.get(c, ()))))
                )
                if cut_here and not self.live(term) and not term.opaque and self.live(rest):
                    # A term whose graph was cut, added to one that has a graph: it adds nothing to the gradients.
                    self.cut_terms[node] = self.cut_terms.get(node, frozenset()) | cut_here
        if left.kind == NUMBER and right.kind == NUMBER:
            if isinstance(node, cst.BinaryOperation) or isinstance(node, cst.AugAssign):
                return Value(NUMBER, cuts=left.cuts | right.cuts) if left.cuts or right.cuts else A_NUMBER
        if left.kind == CONTAINER or right.kind == CONTAINER or left.items is not None and right.items is not None:
            if left.items is not None and right.items is not None:
                return Value(TUPLE, items=left.items + right.items)
            return join(left, right) or UNKNOWN_VALUE
        kind = TENSOR if TENSOR in (left.kind, right.kind) else (ARRAY if ARRAY in (left.kind, right.kind) else UNKNOWN)
        if kind == UNKNOWN and NUMBER in (left.kind, right.kind):
            kind = UNKNOWN
        result = graph_of([left, right], kind)
        if grad is False and (result.origins or result.opaque):
            return self._cut(result, node, kind)
        return result

    def cut_into_value(self, node: cst.CSTNode) -> bool:
        """A cut that turns a tensor into a Python number, an array or a new
        tensor of its values, or into indices: `.item()`, `.numpy()`,
        `torch.tensor(...)`, `np.array(...)`, `argmax` (method or function)."""
        if not isinstance(node, cst.Call):
            return False
        if isinstance(node.func, cst.Attribute) and node.func.attr.value in TO_PYTHON_METHODS | INDEX_METHODS:
            return True
        qualified = self.names.qualified(node.func) or ""
        if qualified.startswith("torch.") and qualified[len("torch."):] in INDEX_METHODS:
            return True
        return qualified in COPYING_CONSTRUCTORS or qualified in ("torch.as_tensor", "torch.from_numpy") or qualified.startswith("numpy.")

    def _compare(self, node: cst.Comparison, left: Value, rights: List[Value]) -> Value:
        """A comparison of values known in this context: constants, and an
        object, module, optimizer or tensor against `None` (`if self.opt is not None`)."""
        if len(rights) != 1:
            return A_NUMBER
        right, operator = rights[0], node.comparisons[0].operator
        if left.kind == right.kind == NUMBER and left.const is not _NO and right.const is not _NO:
            try:
                if isinstance(operator, cst.Equal):
                    return constant(left.const == right.const)
                if isinstance(operator, cst.NotEqual):
                    return constant(left.const != right.const)
                if isinstance(operator, cst.Is):
                    return constant(left.const is right.const)
                if isinstance(operator, cst.IsNot):
                    return constant(left.const is not right.const)
            except Exception:  # noqa: BLE001
                pass
        if isinstance(operator, (cst.Is, cst.IsNot)):
            for thing, other in ((left, right), (right, left)):
                if other.kind == NUMBER and other.const is None and not thing.opaque and thing.kind in _NEVER_NONE:
                    return constant(isinstance(operator, cst.IsNot))
        if TENSOR in (left.kind, right.kind):
            # A mask: no graph, but it remembers the cuts its operands passed
            # (`indices == k` after an `argmax`), which selecting with it carries on.
            return Value(TENSOR, cuts=left.cuts | right.cuts)
        return A_NUMBER

    # Calls -------------------------------------------------------------------

    def _call(self, node: cst.Call, env: dict, grad) -> Value:
        callee = self._expr(node.func, env, grad)
        edited = _grad_edited(node)
        if edited is not None:  # `p.grad.zero_()`, `p.grad.data.mul_(0)`: gradients cleared by hand
            owner = self.values.get(edited)
            if owner is not None:
                self.grads_by_hand |= owner.origins
        if callee.kind == EXTERNAL and callee.const == "builtins.super":
            return self._super(node, env)
        args: List[Value] = []
        kwargs: Dict[str, Value] = {}
        for arg in node.args:
            value = self._expr(arg.value, env, grad)
            if arg.keyword is not None:
                kwargs[arg.keyword.value] = value
            elif arg.star == "*":
                if value.items is not None:
                    args.extend(value.items)
                else:
                    args.append(self.element_of(value))
            elif arg.star == "**":
                continue
            else:
                args.append(value)
        if self._grad_change is not _NO:  # `net(x).sum().backward()` after a call that turned autograd off
            grad = _truth(self._grad_change)
        modes = self.grad.setdefault(node, set())
        modes.add(grad)
        result = None
        self._call_nodes.append(node)
        self._call_contexts.append(self._context())
        self._call_modes.append(grad)
        try:
            for ref in callee.refs or (None,):
                result = join(result, self._call_ref(node, callee, ref, args, kwargs, grad))
        finally:
            self._call_nodes.pop()
            self._call_contexts.pop()
            self._call_modes.pop()
        if result is not None and grad is False and any(isinstance(r, (cst.FunctionDef, cst.Lambda, Bound)) for r in callee.refs):
            # A helper run with autograd off: its graphs end at this call.
            result = self._recut(result, graph_of(list(args) + list(kwargs.values())).cuts, node)
        return result or UNKNOWN_VALUE

    def _recut(self, value: Value, given: FrozenSet, node: cst.CSTNode, depth: int = 0) -> Value:
        inner = value.cuts - given
        if inner:
            dropped = self._dropped_at(node, set())
            for cut_node in inner:
                dropped |= self.dropped.get(cut_node, set())
            value = replace(value, cuts=frozenset({node}))
        if value.items is not None and depth < 2:
            value = replace(value, items=tuple(self._recut(item, given, node, depth + 1) for item in value.items))
        return value

    def _recut_container(self, value: Value, given: FrozenSet, node: cst.CSTNode) -> Value:
        """A copy of the containers `value` holds, made at `node`, whose items' graphs end there."""
        copies = set()
        for ref in value.refs:
            if not isinstance(ref, Obj) or ref.kind != CONTAINER:
                return value
            copy = self._object(node, CONTAINER)
            if ref.elements is not None:
                self._store_element(copy, self._recut(ref.elements, given, node))
            for key, item in ref.keys.items():
                self._store_element(copy, self._recut(item, given, node), key)
            copies.add(copy)
        return replace(value, refs=frozenset(copies), cuts=frozenset({node}) if value.cuts - given else value.cuts)

    def _call_ref(self, node, callee: Value, ref, args, kwargs, grad) -> Value:
        if ref is None:
            if callee.kind == EXTERNAL and isinstance(callee.const, str):
                return self._external(node, callee.const, args, kwargs, grad)
            # An unknown callable: its result may depend on its arguments.
            return self._unknown_call(args, kwargs)
        if isinstance(ref, cst.FunctionDef) or isinstance(ref, cst.Lambda):
            return self._call_function(ref, None, args, kwargs, grad)
        if isinstance(ref, Bound):
            modules = [r for r in ref.receiver.refs if isinstance(r, Obj) and r.kind == MODULE] if ref.receiver is not None else []
            written = isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "forward"
            if written and isinstance(ref.function, cst.FunctionDef) and ref.function.name.value == "forward" and modules:
                # `model.forward(x)`: the module's call without its hooks, a forward all the same.
                return join_all(self._run_object(node, obj, args, kwargs, grad) for obj in modules) or UNKNOWN_VALUE
            return self._call_function(ref.function, ref.receiver, args, kwargs, grad)
        if isinstance(ref, cst.ClassDef):
            return self._instantiate(node, ref, args, kwargs, grad)
        if isinstance(ref, Obj):
            return self._call_object(node, ref, args, kwargs, grad)
        if isinstance(ref, tuple) and ref[0] == "tensor_method":
            return self._tensor_method(node, ref[2], ref[1], args, kwargs, grad)
        if isinstance(ref, tuple) and ref[0] == "inherited":
            # A method of torch's or another package's base class (`nn.Module.__init__`).
            out = graph_of(list(args) + list(kwargs.values()), UNKNOWN)
            return replace(out, origins=out.origins | self.module_closure(ref[2]), opaque=True)
        if isinstance(ref, tuple) and ref[0] == "method":
            return self._method_call(node, ref[2], ref[1], args, kwargs, grad)
        return UNKNOWN_VALUE

    def _super(self, node: cst.Call, env: dict) -> Value:
        """`super()` in a method: the instance, looked up from past its class."""
        function = self.index.enclosing(node, cst.FunctionDef)
        klass = self._class_of_method(function) if function is not None else None
        param = self.index.instance_param(function) if klass is not None else None
        receiver = env.get(param) if param is not None else None
        if klass is None or receiver is None:
            return UNKNOWN_VALUE
        return Value(OBJECT, refs=frozenset({("super", klass, receiver)}))

    def _accumulate(self, node: cst.CSTNode, tensor: Value, args: Sequence[Value], grad) -> None:
        """An in-place op on a tensor a factory made, whose history takes the
        graph of what is added; or a value stored in a new slot of a container
        (`append` is DL401's own, which knows its other spellings)."""
        storages = frozenset(r for r in tensor.refs if isinstance(r, Obj) and r.kind in (STORAGE, CONTAINER, OBJECT, MODULE))
        # What unknown code returns (`weakref.ref(loss)`) may not hold the tensor.
        held = [a for a in args if a.kind in (TENSOR, TUPLE, CONTAINER)]
        if storages and held and grad is not False:
            value = replace(graph_of(held), refs=storages)
            if isinstance(node, cst.Call):
                self._event("accumulate", node, value, grad)
            else:  # a statement: every call on the stack led to it
                self.events.append(Event("accumulate", node, value, grad, tuple(self._call_nodes), tuple(self._call_contexts) + (self._context(),)))

    def _accumulate_in_holder(self, node: cst.CSTNode, target: cst.BaseExpression, args: Sequence[Value], env: dict, grad) -> None:
        """`self.sum += val`, `totals[k] = totals[k] + loss`: a sum kept in a
        field or a slot of an object or container, which lives as long as it."""
        if not isinstance(target, (cst.Attribute, cst.Subscript)):
            return
        base = self.values.get(target.value) or self._expr(target.value, env, grad)
        holders = frozenset(r for r in base.refs if isinstance(r, Obj) and r.kind in (OBJECT, MODULE, CONTAINER))
        if holders:
            self._accumulate(node, Value(TENSOR, refs=holders), args, grad)

    def _event(self, kind: str, node: cst.CSTNode, value: Value, grad) -> None:
        mode = self._grad_change if self._grad_change is not _NO else self._mode_now
        mode_set_by = mode.cuts if mode is not None else _EMPTY
        self.events.append(
            Event(
                kind, node, value, grad, tuple(self._call_nodes[:-1]), tuple(self._call_contexts[:-1]) + (self._context(),),
                mode_set_by, tuple(self._call_modes[:-1]),
            )
        )
        if kind in ("backward", "grad"):
            self.backpropagated |= value.made_by

    def _forward_ran(self, node: cst.CSTNode, params: Iterable, grad) -> FrozenSet:
        """Note a module call run with autograd on over parameters that require
        grad: what its output's graph is made by."""
        if grad is False or not (set(params) - self.frozen):
            return _EMPTY
        made = (node, self._context())
        calls = self._call_nodes[:-1] if self._call_nodes and self._call_nodes[-1] is node else self._call_nodes
        frames = tuple(zip(calls, self._call_contexts))
        self.forward_runs.setdefault(node, set()).add((made[1], self._standalone_run, frames))
        self.forward_params.setdefault(node, set()).update(params)
        return frozenset({made})

    def _unknown_call(self, args, kwargs, escapes: bool = True) -> Value:
        parts = list(args) + list(kwargs.values())
        if escapes:
            for part in parts:
                self.escaped |= self._reachable_parameters(part)
            self.escaped_forwards |= graph_of(parts).made_by
        return replace(graph_of(parts, UNKNOWN), opaque=True)

    def _instantiate(self, node, klass: cst.ClassDef, args, kwargs, grad) -> Value:
        module_class = self.modules.class_for(klass)
        obj = self._object(node, MODULE if module_class is not None else OBJECT, klass=klass)
        if module_class is not None:
            obj.params = obj.params or self._own_parameters(klass)
        receiver = self._ref(obj)
        init = self._method(klass, "__init__")
        if init is not None:
            self._call_function(init, receiver, args, kwargs, grad)
        return receiver

    def _call_object(self, node, obj: Obj, args, kwargs, grad) -> Value:
        out = self._run_object(node, obj, args, kwargs, grad)
        # Forward hooks run with the module, its inputs and its output; those of
        # the layers of a torch container it runs, with (for want of theirs) its output.
        hooked = [obj]
        if obj.klass is None and obj.elements is not None:
            hooked += [r for r in obj.elements.refs if isinstance(r, Obj) and r.kind == MODULE and r.hooks is not None]
        for module in hooked:
            if module.hooks is None:
                continue
            hook_args = [self._ref(module), Value(TUPLE, items=tuple(args)), out]
            for ref in module.hooks.refs:
                replaced = self._call_ref(node, module.hooks, ref, hook_args, {}, grad)
                if module is obj and replaced.kind != NUMBER:  # a hook returning a value replaces the output
                    out = join(out, replaced) or out
        if obj.kind in (MODULE, SYMBOLIC) and obj.copied_from is not None and out.kind in (TENSOR, UNKNOWN) and self.module_closure(self._ref(obj)) - self.frozen:
            # A deep copy's outputs carry the copy's graph, never the original's.
            self._dropped_at(obj.site, set()).update(self.module_closure(self._ref(obj.copied_from)))
            out = replace(out, cuts=out.cuts | {obj.site})
        return out

    def _run_object(self, node, obj: Obj, args, kwargs, grad) -> Value:
        receiver = self._ref(obj)
        if obj.klass is not None:
            method = self._method(obj.klass, "forward" if obj.kind == MODULE else "__call__")
            if method is None and obj.kind == MODULE:
                method = self._method(obj.klass, "__call__")
            if method is not None:
                out = self._call_function(method, receiver, args, kwargs, grad)
                if obj.kind == MODULE:
                    self.module_calls.add(node)
                if obj.kind == MODULE and grad is not False and self.module_closure(receiver):
                    if out.kind in (TENSOR, UNKNOWN, TUPLE) and not out.refs and self.live(graph_of([out])):
                        out = _with_made(out, self._forward_ran(node, self.module_closure(receiver), grad))
                if obj.kind == MODULE and grad is False and out.kind == CONTAINER:
                    # A list of features computed with autograd off: each one's graph ends at this call.
                    return self._recut_container(out, graph_of(list(args) + list(kwargs.values())).cuts, node)
                if obj.kind == MODULE and out.kind in (TENSOR, UNKNOWN) and not out.refs:
                    if grad is False:
                        # Run with autograd off: the call is where its graph
                        # ends, for the module and for what its forward cut.
                        given = graph_of(list(args) + list(kwargs.values())).cuts
                        dropped = self._dropped_at(node, set())
                        dropped |= self.module_closure(receiver)
                        for inner in out.cuts - given:
                            dropped |= self.dropped.get(inner, set())
                        return Value(out.kind, cuts=frozenset({node}))
                    if obj.params:
                        return replace(out, origins=out.origins | {obj})
                return out
        if obj.kind in (MODULE, SYMBOLIC):
            self.module_calls.add(node)
        if obj.kind == SYMBOLIC:
            # Unknown code: its output may depend on its inputs and its own parameters.
            out = graph_of(list(args) + list(kwargs.values()), UNKNOWN)
            out = replace(out, origins=out.origins | {obj}, opaque=True)
            if grad is False:
                return self._cut(out, node, UNKNOWN)
            return replace(out, made_by=out.made_by | self._forward_ran(node, {obj}, grad))
        if obj.kind == MODULE:
            self._event("forward", node, receiver, grad)
            out = graph_of(list(args) + list(kwargs.values()))
            origins = self.module_closure(receiver) if obj.params or obj.elements is not None or obj.fields else _EMPTY
            if grad is False:
                return self._cut(replace(out, origins=out.origins | origins), node)
            made_by = out.made_by | self._forward_ran(node, origins, grad)
            if obj.qualified and obj.qualified.rsplit(".", 1)[-1] in ("LSTM", "GRU", "RNN", "MultiheadAttention", "Transformer"):
                part = Value(TENSOR, out.origins | origins, out.cuts, opaque=out.opaque, made_by=made_by)
                return Value(TUPLE, items=(part, part), origins=out.origins | origins, opaque=out.opaque, made_by=made_by)
            return Value(TENSOR, out.origins | origins, out.cuts, opaque=out.opaque, made_by=made_by)
        return self._unknown_call(args, kwargs)

    def _external(self, node, qualified: str, args, kwargs, grad) -> Value:
        last = qualified.rsplit(".", 1)[-1]
        if qualified in _SETS_GRAD_MODE and (args or "mode" in kwargs):
            self._grad_change = _mode_value(_truth(args[0] if args else kwargs["mode"]), node)  # in force until changed back
        if qualified.startswith("builtins."):
            return self._builtin(node, last, args, kwargs, grad)
        if qualified in ("copy.deepcopy", "copy.copy") and args:
            return self._copy(node, args[0])
        if qualified.startswith("torch.optim.") and last[:1].isupper() and "lr_scheduler" not in qualified:
            obj = self._object(node, OPTIMIZER, qualified=qualified)
            owned = args[0] if args else kwargs.get("params", UNKNOWN_VALUE)
            obj.owns = obj.owns | self._owned(owned)
            return self._ref(obj)
        if qualified == "torch.nn.Parameter" or qualified == "torch.nn.parameter.Parameter":
            flag = args[1] if len(args) > 1 else kwargs.get("requires_grad", constant(True))
            if _truth(flag) is False:
                return Value(TENSOR, cuts=self._cut(graph_of(args[:1]), node).cuts, leaf=True)  # a buffer in all but name
            return Value(TENSOR, origins=frozenset({node}), leaf=True)
        if qualified.startswith("torch.nn.") and last[:1].isupper() and ".functional." not in qualified and ".utils." not in qualified:
            obj = self._object(node, MODULE, qualified=qualified)
            obj.params = self.modules.builds_parameters(node)
            for i, value in enumerate(args):
                if value.kind == MODULE or any(isinstance(r, Obj) and r.kind == SYMBOLIC for r in value.refs):
                    self._store_element(obj, value, i)
                elif value.refs:
                    for ref in value.refs:
                        if isinstance(ref, Obj) and ref.kind == CONTAINER and ref.elements is not None:
                            self._store_element(obj, ref.elements)
                elif value.element is not None:  # `nn.ModuleList(nn.Conv2d(...) for _ in range(n))`
                    self._store_element(obj, value.element)
            return self._ref(obj)
        if qualified in VARIABLE_CLASSES:
            value = args[0] if args else NO_GRAPH_TENSOR
            if _truth(kwargs.get("requires_grad", constant(False))) is True:
                return self._new_leaf(node, [value])
            return graph_of([value])
        if qualified == "itertools.chain":
            return Value(ITERATOR, element=join_all(self.element_of(a) for a in args) or UNKNOWN_VALUE)
        if not qualified.startswith("torch."):
            if qualified.startswith("numpy."):
                return Value(ARRAY, cuts=self._cut(graph_of(args), node).cuts)
            return self._unknown_call(args, kwargs)
        # torch's own functions
        if _truth(kwargs.get("requires_grad", constant(False))) is True and (last in FACTORIES or qualified in NEW_VALUE_FUNCTIONS or qualified in COPYING_CONSTRUCTORS):
            return self._new_leaf(node, args)
        if qualified in COPYING_CONSTRUCTORS or last in ("as_tensor", "from_numpy"):
            return replace(self._cut(graph_of(args), node), refs=frozenset({self._object(node, STORAGE)}))
        if last in FACTORIES or qualified in NEW_VALUE_FUNCTIONS:
            return Value(TENSOR, refs=frozenset({self._object(node, STORAGE)}))
        if last in SPLITTING_METHODS or last in VALUES_AND_INDICES:
            return self._split(node, graph_of(args[:1]), last, args[1:], kwargs, grad)
        if last in NOT_TENSOR_FUNCTIONS or last in NO_GRAPH_METHODS:
            if last in NO_GRAPH_METHODS:
                return self._cut(graph_of(args), node)
            return UNKNOWN_VALUE
        if qualified in ("torch.autograd.grad",):
            # Gradients returned, not accumulated into `.grad`: no step uses them as they are.
            self._event("grad", node, graph_of(args[:1]), grad)
            return Value(ITERATOR, element=NO_GRAPH_TENSOR)
        if qualified == "torch.autograd.backward":
            self._event("backward", node, graph_of(args[:1]), grad)
            return constant(None)
        out = graph_of(list(args) + [v for k, v in kwargs.items() if k not in TENSOR_METADATA and k != "keepdim"])
        if grad is False:
            return self._cut(out, node)
        return out

    def _note_forced(self, node: cst.CSTNode, value: Value) -> None:
        """`loss.requires_grad = True` (or `requires_grad_()`) on a value whose
        graph was cut on its way here: the new leaf stands where a graph was."""
        cuts = frozenset(c for c in value.cuts if self.dropped.get(c))
        if cuts:
            self.forced[node] = self.forced.get(node, frozenset()) | cuts

    def _new_leaf(self, node: cst.CSTNode, sources: Sequence[Value]) -> Value:
        """`torch.tensor(x, requires_grad=True)`: a new leaf with `x`'s values,
        the graphs that led to them dropped here (or before)."""
        cut_value = self._cut(graph_of(sources), node)
        self._note_forced(node, cut_value)  # made from values whose graph it drops: a leaf where a graph was
        return Value(TENSOR, origins=frozenset({node}), cuts=cut_value.cuts, leaf=True)

    def _owned(self, value: Value) -> FrozenSet:
        """The origins an optimizer built on `value` owns: parameters from any
        iterable, param groups (`[{"params": ...}]`), chains of them."""
        owned = set(value.origins)
        for element in (value.element,) if value.element is not None else ():
            owned |= self._owned(element)
        if value.items is not None:
            for item in value.items:
                owned |= self._owned(item)
        for ref in value.refs:
            if isinstance(ref, Obj) and ref.kind == CONTAINER:
                for inner in list(ref.keys.values()) + ([ref.elements] if ref.elements is not None else []):
                    owned |= self._owned(inner)
            elif isinstance(ref, Obj) and ref.kind in (MODULE, SYMBOLIC):
                owned |= self.module_closure(self._ref(ref))
        return frozenset(owned)

    def _copy(self, node, value: Value, copies: Optional[dict] = None) -> Value:
        """`copy.deepcopy(net)`: new objects, one per object copied, allocated at `node`."""
        copies = {} if copies is None else copies
        refs = set()
        for ref in value.refs:
            if not isinstance(ref, Obj):
                refs.add(ref)
                continue
            if ref in copies:
                refs.add(copies[ref])
                continue
            copy = copies[ref] = self._object(node, ref.kind, context=ref, klass=ref.klass, qualified=ref.qualified)
            copy.params = ref.params
            copy.copied_from = ref
            for name, field_value in list(ref.fields.items()):
                if field_value.kind == MODULE:
                    copied = self._copy(node, field_value, copies)
                elif field_value.kind == TENSOR and field_value.origins:
                    # The copy's own parameters: new leaves.
                    copied = Value(TENSOR, origins=frozenset((origin, copy) for origin in field_value.origins))
                else:
                    copied = field_value
                self._store_field(copy, name, copied)
            if ref.elements is not None:
                self._store_element(copy, self._copy(node, ref.elements, copies) if ref.elements.kind == MODULE else ref.elements)
            refs.add(copy)
        if refs:
            return Value(value.kind, refs=frozenset(refs))
        if value.kind == TENSOR and value.origins:
            return Value(TENSOR, origins=frozenset({node}))
        return value

    def _builtin(self, node, name: str, args, kwargs, grad) -> Value:
        if name in PYTHON_NUMBER_BUILTINS:
            return self._cut(graph_of(args), node, NUMBER)
        if name == "setattr" and len(args) == 3 and isinstance(args[1].const, str):
            for ref in args[0].refs:
                if isinstance(ref, Obj):
                    self._store_field(ref, args[1].const, args[2])
            return constant(None)
        if name in INSPECTING_BUILTINS or name in IDENTITY_BUILTINS or name == "hasattr":
            return A_NUMBER
        if name == "getattr" and len(args) >= 2 and isinstance(args[1].const, str):
            found = None
            for ref in args[0].refs:
                if isinstance(ref, Obj):
                    found = join(found, self._fields_of(ref, args[1].const))
            return found or (args[2] if len(args) > 2 else UNKNOWN_VALUE)
        if name == "range":
            return Value(ITERATOR, element=A_NUMBER)
        if name == "enumerate" and args:
            return Value(ITERATOR, element=Value(TUPLE, items=(A_NUMBER, self.element_of(args[0]))))
        if name == "zip":
            return Value(ITERATOR, element=Value(TUPLE, items=tuple(self.element_of(a) for a in args)))
        if name in ("list", "tuple", "sorted", "reversed", "set", "iter", "frozenset"):
            if not args:
                obj = self._object(node, CONTAINER)
                return self._ref(obj)
            if name in ("iter", "reversed"):
                return Value(ITERATOR, element=self.element_of(args[0]))
            obj = self._object(node, CONTAINER)
            self._store_element(obj, self.element_of(args[0]))
            return self._ref(obj)
        if name == "dict":
            obj = self._object(node, CONTAINER)
            for key, value in kwargs.items():
                self._store_element(obj, value, key)
            return self._ref(obj)
        if name == "next" and args:
            return self.element_of(args[0])
        if name in ("sum", "max", "min", "abs") and args:
            parts = [self.element_of(args[0]) if args[0].kind != TENSOR and name != "abs" else args[0]] + list(args[1:])
            return graph_of(parts, TENSOR if any(p.kind == TENSOR for p in parts) else UNKNOWN)
        if name == "map" and len(args) >= 2:
            result = None
            element = self.element_of(args[1])
            for ref in args[0].refs or (None,):
                result = join(result, self._call_ref(node, args[0], ref, [element], {}, grad))
            return Value(ITERATOR, element=result or UNKNOWN_VALUE)
        if name == "super":
            return UNKNOWN_VALUE
        return self._unknown_call(args, kwargs, escapes=False)

    def _tensor_method(self, node, tensor: Value, method: str, args, kwargs, grad) -> Value:
        if method in DETACHING_METHODS:
            return self._cut(tensor, node)
        if method in TO_PYTHON_METHODS:
            return self._cut(tensor, node, NUMBER if method != "numpy" else ARRAY)
        if method in SIZE_METHODS or method in TENSOR_METADATA:
            return A_NUMBER
        if method in NO_GRAPH_METHODS:
            return self._cut(tensor, node)
        if method in ("backward", "manual_backward"):
            self._event("backward", node, tensor, grad)
            return constant(None)
        if method == "requires_grad_":
            flag = _truth(args[0]) if args else _truth(kwargs.get("requires_grad", constant(True)))
            if flag is False:
                self._freeze(tensor.origins)
                return self._cut(tensor, node)
            if flag is True:
                self._thaw(tensor.origins)
            if not tensor.origins:
                self._note_forced(node, tensor)
            return tensor if tensor.origins else Value(TENSOR, origins=frozenset({node}), cuts=tensor.cuts, leaf=True)
        if method in SPLITTING_METHODS or method in VALUES_AND_INDICES:
            return self._split(node, tensor, method, args, kwargs, grad)
        if method == "type" and (args or kwargs):  # `x.type(torch.complex64)`: a cast, not the type's name
            return graph_of([tensor])
        if method in NOT_TENSOR_METHODS or method == "retain_grad":
            return UNKNOWN_VALUE
        if method in VIEW_METHODS and tensor.leaf:
            return replace(graph_of([tensor] + list(args)), leaf=True)
        if method.endswith("_") and not method.startswith("_") and method not in NOT_VALUE_EDITS:
            if tensor.leaf and grad is not False and self.live(tensor) and not tensor.opaque:
                self._event("leaf_edit", node, tensor, grad)  # raises: a leaf that requires grad edited in place
            if method in _ACCUMULATING:
                self._accumulate(node, tensor, args, grad)
            if grad is False or any(isinstance(c, cst.Attribute) and c.attr.value == "data" for c in tensor.cuts):
                # Values written by hand from other parameters (an EMA or
                # target-network update), not left to gradients.
                if any(self._graph_or_dropped(a) for a in args):
                    self.set_by_hand |= tensor.origins
                    for c in tensor.cuts:
                        self.set_by_hand |= self.dropped.get(c, set())
            return graph_of([tensor] + list(args))
        out = graph_of([tensor] + list(args) + list(kwargs.values()))
        if grad is False:
            return self._cut(out, node)
        return out

    def _split(self, node, tensor: Value, name: str, rest, kwargs, grad) -> Value:
        """`x.split(n)`, `torch.max(x, 1)`: views of `x`, or its values and their indices."""
        out = graph_of([tensor] + [v for v in rest if v.kind == TENSOR]) if grad is not False else self._cut(tensor, node)
        if name in SPLITTING_METHODS:
            return Value(ITERATOR, origins=out.origins, cuts=out.cuts, element=out)
        if name in ("max", "min") and not rest and "dim" not in kwargs:
            return out  # the largest value itself
        indices = self._cut(out, node)
        return Value(TENSOR, out.origins, out.cuts, items=(out, indices))

    def _method_call(self, node, receiver: Value, method: str, args, kwargs, grad) -> Value:
        """A method of something that is not one of the file's classes (or that
        the class does not define): torch's module and optimizer API,
        containers, tensors of unknown kind."""
        if isinstance(receiver, Obj):
            holder = receiver
            receiver_value = self._ref(holder)
        else:
            holder = None
            receiver_value = receiver
        kind = holder.kind if holder is not None else receiver_value.kind
        if method == "backward" and kind in (SYMBOLIC, NUMBER, UNKNOWN):
            # Whatever it holds, a backward ran here (or raised).
            return self._tensor_method(node, UNKNOWN_VALUE if holder is not None else receiver_value, method, args, kwargs, grad)
        if kind == SYMBOLIC and holder is not None:
            if method in PARAMETER_ITERATORS:
                param = Value(TENSOR, origins=self.module_closure(receiver_value), leaf=True)
                return Value(ITERATOR, element=Value(TUPLE, items=(A_NUMBER, param)) if method == "named_parameters" else param)
            if method == "requires_grad_" and _truth(args[0] if args else kwargs.get("requires_grad", constant(True))) is False:
                self._freeze(self.module_closure(receiver_value))
            if method == "eval" or (method == "train" and args and _truth(args[0]) is False):
                self.eval_switched |= self.module_closure(receiver_value)
            if method == "zero_grad":  # a model handed in, or an optimizer: it clears what it holds
                self._event("zero_grad", node, Value(TENSOR, origins=self.module_closure(receiver_value)), grad)
                return constant(None)
            if method in MODULE_RETURNING_SELF:
                return receiver_value
            if method in DETACHING_METHODS or method in TO_PYTHON_METHODS or method in NO_GRAPH_METHODS:
                return self._tensor_method(node, UNKNOWN_VALUE, method, args, kwargs, grad)
            return self._unknown_call(args, kwargs)
        if kind == MODULE:
            if method == "requires_grad_":
                flag = _truth(args[0] if args else kwargs.get("requires_grad", constant(True)))
                if flag is False:
                    self._freeze(self.module_closure(receiver_value))
                elif flag is True:
                    self._thaw(self.module_closure(receiver_value))
            if method == "eval" or (method == "train" and args and _truth(args[0]) is False):
                self.eval_switched |= self.module_closure(receiver_value)
            if method in MODULE_RETURNING_SELF:
                return receiver_value
            if method == "register_forward_hook" and args and holder is not None:
                hooks = join(holder.hooks, args[0])
                if hooks != holder.hooks:
                    holder.hooks = hooks
                    self._heap_changed = True
                return UNKNOWN_VALUE
            if method == "load_state_dict" and node.args and _state_dict_of_module(node.args[0].value, self.values):
                self.set_by_hand |= self.module_closure(receiver_value)
            elif method == "load_state_dict" and node.args:
                self.loaded |= self.module_closure(receiver_value)  # trained weights, from a checkpoint
            if method in PARAMETER_ITERATORS:
                param = Value(TENSOR, origins=self.module_closure(receiver_value), leaf=True)
                element = Value(TUPLE, items=(A_NUMBER, param)) if method == "named_parameters" else param
                return Value(ITERATOR, element=element)
            if method in SUBMODULE_ITERATORS:
                return Value(ITERATOR, element=receiver_value)
            if method == "zero_grad":
                self._event("zero_grad", node, Value(TENSOR, origins=self.module_closure(receiver_value)), grad)
                return constant(None)
            if method == "forward" and holder is not None:
                return self._call_object(node, holder, args, kwargs, grad)
            if method in ("add_module", "register_module") and len(args) >= 2 and holder is not None and isinstance(args[0].const, str):
                self._store_field(holder, args[0].const, args[1])
                return constant(None)
            if method in ("append", "extend") and holder is not None and args:
                self._store_element(holder, args[0] if method == "append" else self.element_of(args[0]))
                return constant(None)
            if method in MODULE_API:
                return UNKNOWN_VALUE
            return self._unknown_call(args, kwargs)
        if kind == OPTIMIZER:
            owned = join_all(Value(TENSOR, origins=r.owns) for r in receiver_value.refs if isinstance(r, Obj)) or NO_GRAPH_TENSOR
            if method == "step":
                self._event("step", node, replace(owned, refs=receiver_value.refs), grad)
            elif method == "zero_grad":
                self._event("zero_grad", node, replace(owned, refs=receiver_value.refs), grad)
            elif method == "add_param_group" and args and holder is not None:
                holder.owns = holder.owns | self._owned(args[0])
            return constant(None)
        if kind == CONTAINER and holder is not None:
            if method in STORING_METHODS - {"update", "extend", "setdefault"}:
                if args:
                    self._store_element(holder, args[-1])
                return constant(None)
            if method == "extend" and args:
                self._store_element(holder, self.element_of(args[0]))
                return constant(None)
            if method == "update":
                for key, value in kwargs.items():
                    self._store_element(holder, value, key)
                for value in args:
                    for ref in value.refs:
                        if isinstance(ref, Obj) and ref.kind == CONTAINER:
                            for key, inner in ref.keys.items():
                                self._store_element(holder, inner, key)
                return constant(None)
            if method in ("get", "pop") or method == "setdefault":
                key = args[0].const if args else _NO
                stored = holder.keys.get(key) if key is not _NO and key in holder.keys else holder.elements
                default = args[1] if len(args) > 1 else None
                if method == "setdefault" and default is not None:
                    self._store_element(holder, default, key)
                    if default.refs:
                        return join(stored, default) or default
                return join(stored, default) or UNKNOWN_VALUE
            if method == "values":
                return Value(ITERATOR, element=holder.elements or UNKNOWN_VALUE)
            if method == "items":
                return Value(ITERATOR, element=Value(TUPLE, items=(A_NUMBER, holder.elements or UNKNOWN_VALUE)))
            if method == "keys":
                return Value(ITERATOR, element=A_NUMBER)
            if method == "copy":
                return receiver_value
            return UNKNOWN_VALUE
        if kind in (TENSOR, UNKNOWN) and holder is None and not any(isinstance(r, (Obj, Bound, cst.CSTNode)) for r in receiver_value.refs):
            if receiver_value.kind == TENSOR or method in DETACHING_METHODS or method in TO_PYTHON_METHODS or method in NO_GRAPH_METHODS or method in ("backward",):
                return self._tensor_method(node, receiver_value, method, args, kwargs, grad)
            return graph_of([receiver_value] + list(args) + list(kwargs.values()), UNKNOWN)
        if kind == NUMBER:
            return A_NUMBER
        if kind == ARRAY:
            return Value(ARRAY)
        return self._unknown_call(args, kwargs)


def _with_made(value: Value, made: FrozenSet, depth: int = 0) -> Value:
    """`value` (and the positions of a tuple) carrying the graph of `made` too."""
    if not made or value.kind not in (TENSOR, UNKNOWN, TUPLE) or value.refs:
        return value
    items = value.items
    if items is not None and depth < 2:
        items = tuple(_with_made(item, made, depth + 1) for item in items)
    return replace(value, made_by=value.made_by | made, items=items)


def _state_dict_of_module(expr: cst.BaseExpression, values: Dict[cst.CSTNode, Value]) -> bool:
    """`online.state_dict()`: another module's weights, copied over."""
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "state_dict"):
        return False
    receiver = values.get(expr.func.value)
    return receiver is not None and receiver.kind == MODULE


def _grad_edited(call: cst.Call) -> Optional[cst.BaseExpression]:
    """`p` in `p.grad.zero_()`, `p.grad.data.fill_(0)`: an in-place edit of a gradient."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value.endswith("_") and not func.attr.value.startswith("_")):
        return None
    receiver = func.value
    if isinstance(receiver, cst.Attribute) and receiver.attr.value == "data":
        receiver = receiver.value
    return _grad_of(receiver)


def _grad_of(expr: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`p` in `p.grad` or `p._grad`."""
    if isinstance(expr, cst.Attribute) and expr.attr.value in ("grad", "_grad"):
        return expr.value
    return None


def _adds_to_itself(target: cst.BaseExpression, value: cst.BaseExpression) -> bool:
    """`x.f = x.f + v` (or `v + x.f`, `x.f - v`): the target read back as an operand of a sum."""
    if not isinstance(value, cst.BinaryOperation) or not isinstance(value.operator, (cst.Add, cst.Subtract)):
        return False
    return any(side.deep_equals(target) for side in (value.left, value.right))


def _truth(value: Optional[Value]) -> Optional[bool]:
    if value is None or value.kind != NUMBER or value.const is _NO:
        return None
    try:
        return bool(value.const)
    except Exception:  # noqa: BLE001
        return None


def _mode(env: dict, grad: Optional[bool]) -> Optional[bool]:
    """The grad mode a statement runs in: what a `set_grad_enabled` call left, else the block's."""
    if _GRAD_MODE in env:
        return _truth(env[_GRAD_MODE])
    return grad


def _mode_value(mode: Optional[bool], source: Optional[cst.CSTNode] = None) -> Value:
    """A grad mode as the environment keeps it; `cuts` holds the `set_grad_enabled` calls that set it."""
    sources = frozenset({source}) if source is not None else _EMPTY
    return Value(NUMBER, cuts=sources, const=mode) if mode is not None else Value(cuts=sources, opaque=True)


def _restored(env: dict, frame: "_Frame") -> dict:
    """The state a `break` or `continue` carries out of the `with` blocks it leaves inside its loop."""
    env = dict(env)
    depth = frame.loop_restores[-1] if frame.loop_restores else 0
    if len(frame.restores) > depth:
        outer = frame.restores[depth]
        env.pop(_GRAD_MODE, None)
        if outer is not _NO:
            env[_GRAD_MODE] = outer
    return env


def _left_mode(exits: List[object], entry: Optional[bool]) -> object:
    """The grad mode a function leaves over all its exits (with the
    `set_grad_enabled` calls that set it), `_NO` when it is the one it found."""
    left = join_all(_mode_value(entry) if mode is _NO else mode for mode in exits)
    if left is None or (not left.cuts and _truth(left) == entry):
        return _NO
    return left


def _join_env(a: Optional[dict], b: Optional[dict]) -> Optional[dict]:
    if a is None:
        return b
    if b is None:
        return a
    if a is b:
        return a
    result = {}
    for name in a.keys() | b.keys():
        if name in a and name in b:
            result[name] = join(a[name], b[name])
        elif name == _GRAD_MODE:
            result[name] = UNKNOWN_VALUE  # one path changed the mode, the other kept the block's
        else:
            result[name] = a.get(name) or b.get(name)
    return result


def _expression_children(node: cst.CSTNode) -> List[cst.BaseExpression]:
    found = []
    for child in _children(node):
        if isinstance(child, cst.BaseExpression):
            found.append(child)
    return found


def _children(node: cst.CSTNode) -> List[cst.CSTNode]:
    from detachlint.analysis.index import children

    return children(node)
