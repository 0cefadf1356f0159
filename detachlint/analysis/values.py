"""What each name holds, per function.

The function's control flow (`flow.py`) says which of its assignments
may reach a node: both arms of an `if`, a loop's previous pass, nothing
past a `break` or `return`. `reaching` and `loop_carried` give them all;
what a name holds at the node is the join of what they produced (`joined`:
what any of them may hold, but a cut only when every one made it), and
failing any, what the enclosing function's or the module's did. A value is a model, an
optimizer, a loss criterion, an
activation (a tensor computed by a differentiable operation), a loss, a
detached tensor, a tensor read through `.data`, a parameter, a leaf
created with `requires_grad=True`, or a plain number.
"""

from __future__ import annotations

import re
from enum import Flag, auto
from functools import cached_property
from typing import TYPE_CHECKING, Dict, Iterator, List, Optional, Set, Tuple

import libcst as cst

from detachlint.analysis.flow import ScopeFlow
from detachlint.analysis.grad_mode import GradMode, Mode
from detachlint.analysis.intent import Intent
from detachlint.analysis.index import FileIndex
from detachlint.analysis.modules import ModuleFacts
from detachlint.analysis.names import ImportTable, all_params, dotted, string_key, target_names, unpacked_position
from detachlint.analysis.vocabulary import (
    CONVERSIONS,
    DETACHING_METHODS,
    FACTORIES,
    GRAPH_CUTTING_ATTRIBUTES,
    INDEX_METHODS,
    INSPECTING_BUILTINS,
    MODULE_RETURNING_SELF,
    NO_GRAPH_ATTRIBUTES,
    NEW_VALUE_FUNCTIONS,
    NO_GRAPH_METHODS,
    NUMBER_BUILTINS,
    TO_PYTHON_METHODS,
    VALUES_AND_INDICES,
)
from detachlint.analysis.priors import CRITERION_NAME, MODEL_NAME, OPTIMIZER_NAME

if TYPE_CHECKING:  # pragma: no cover
    from detachlint.analysis.across_calls import AcrossCalls


class Holds(Flag):
    NOTHING = 0
    MODEL = auto()
    OPTIMIZER = auto()
    CRITERION = auto()
    ACTIVATION = auto()
    LOSS = auto()
    DETACHED = auto()
    DATA = auto()
    PARAM = auto()
    LEAF = auto()
    NUMBER = auto()
    PACKED = auto()  # a PackedSequence: its `.data` is a field, not a cut


# Anything whose gradient autograd tracks.
GRAD = Holds.ACTIVATION | Holds.LOSS | Holds.PARAM | Holds.LEAF
# What rules read as "no graph here": true of a join only when true of every part.
CUTS = Holds.DETACHED | Holds.DATA | Holds.NUMBER


def joined(one: Holds, other: Holds) -> Holds:
    """What a name holds where two paths' bindings meet: what either may hold
    (a graph on one path reaches the read), but a cut only when both made it."""
    return ((one | other) & ~CUTS) | (one & other & CUTS)


_FUNCTIONAL_LOSS = re.compile(
    r"torch\.nn\.functional\.(\w*loss|cross_entropy|nll_loss|binary_cross_entropy\w*|kl_div|"
    r"mse_loss|l1_loss|smooth_l1_loss|huber_loss|\w+_embedding_loss|ctc_loss)"
)


def is_loss_function(qualified: str) -> bool:
    """`torch.nn.functional.cross_entropy` and the other functional losses."""
    return bool(_FUNCTIONAL_LOSS.fullmatch(qualified))


def is_packing(qualified: str) -> bool:
    """`pack_padded_sequence`, `pack_sequence`, `PackedSequence`: a packed
    batch, whose `.data` holds the packed values themselves."""
    head, _, last = qualified.rpartition(".")
    return head in ("torch.nn.utils.rnn", "torch.nn.utils.rnn.PackedSequence") and (
        last.startswith("pack") or last == "PackedSequence"
    )


def is_variable_read(name: cst.Name, parent: Optional[cst.CSTNode]) -> bool:
    """Whether this Name node reads a variable (not an attribute or keyword)."""
    if isinstance(parent, cst.Attribute) and parent.attr is name:
        return False
    if isinstance(parent, (cst.Arg, cst.Param)) and getattr(parent, "keyword", None) is name:
        return False
    if isinstance(parent, cst.Param) and parent.name is name:
        return False
    if isinstance(parent, (cst.FunctionDef, cst.ClassDef)) and parent.name is name:
        return False
    if isinstance(parent, (cst.AssignTarget, cst.ImportAlias, cst.AsName)):
        return False
    if isinstance(parent, (cst.For, cst.CompFor)) and parent.target is name:
        return False
    return True




def returns_indices_at(call: cst.BaseExpression, position: int) -> bool:
    """Whether element `position` of what `call` returns is an indices
    tensor: `torch.max(x, 1)[1]`, `_, idx = out.topk(5)`."""
    if position != 1 or not isinstance(call, cst.Call):
        return False
    func = call.func
    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
    return name in VALUES_AND_INDICES


def _unpacked_after_first(node: cst.CSTNode, name: str) -> bool:
    """Whether `node` binds `name` as a later element of a tuple unpacked from a call."""
    if isinstance(node, cst.Assign) and isinstance(node.value, (cst.Tuple, cst.List)):
        return False
    return (unpacked_position(node, name) or 0) > 0


class ScopeValues:
    """Assignments of one function (or the module body), and which of them
    reach each node over its control flow."""

    def __init__(self, facts: "ValueFacts", scope: cst.CSTNode) -> None:
        self.facts = facts
        self.scope = scope
        self.assignments: Dict[str, List[Tuple[int, cst.CSTNode, Optional[cst.BaseExpression], Holds]]] = {}
        self._reads: Optional[Dict[str, List[cst.Name]]] = None
        self._closure_reads: Optional[Dict[str, List[cst.Name]]] = None
        self.params: Dict[str, Holds] = {}
        index = facts.index
        if isinstance(scope, cst.FunctionDef):
            for param in all_params(scope.params):
                self.params[param.name.value] = facts.param_holds(param)
        for node in self._own_nodes():
            self._record(node)
        for entries in self.assignments.values():
            entries.sort(key=lambda entry: entry[0])
        # `x.requires_grad = True` and `x.requires_grad_()` statements: they
        # turn the tensor `x` holds into a leaf that requires grad, in place.
        self.grad_flags: Dict[str, List[cst.CSTNode]] = {}
        for statement in index.descendants(scope, cst.SimpleStatementLine):
            if index.scopes[statement] is self.scope:
                for small in statement.body:
                    flagged = grad_flag_set(small)
                    if flagged is not None:
                        self.grad_flags.setdefault(flagged, []).append(small)

    def _own_nodes(self) -> Iterator[cst.CSTNode]:
        index = self.facts.index
        for kind in (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.NamedExpr):
            for node in index.descendants(self.scope, kind):
                if index.scopes[node] is self.scope:
                    yield node

    def _add(self, name: str, node: cst.CSTNode, value, holds: Holds = Holds.NOTHING) -> None:
        entry = (self.facts.index.order[node], node, value, holds)
        self.assignments.setdefault(name, []).append(entry)

    def _record(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Assign):
            for target in node.targets:
                self._bind(target.target, node, node.value)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            self._bind(node.target, node, node.value)
        elif isinstance(node, cst.AugAssign) and isinstance(node.target, cst.Name):
            self._add(node.target.value, node, node.value, Holds.NOTHING)
        elif isinstance(node, cst.NamedExpr) and isinstance(node.target, cst.Name):
            self._add(node.target.value, node, node.value)
        elif isinstance(node, cst.For):
            self._bind_loop(node.target, node, node.iter)

    @property
    def reads(self) -> Dict[str, List[cst.Name]]:
        """Every variable read in this scope, by name, in source order."""
        if self._reads is None:
            index = self.facts.index
            self._reads = {}
            for name in index.descendants(self.scope, cst.Name):
                if index.scopes[name] is self.scope and is_variable_read(name, index.parent(name)):
                    self._reads.setdefault(name.value, []).append(name)
        return self._reads

    @property
    def closure_reads(self) -> Dict[str, List[cst.Name]]:
        """Reads of this scope's names inside a function or lambda nested in
        it (`def keep(m, i, out): feats.append(out)`), by name: whenever
        that runs, it may fill or change what the name holds."""
        if self._closure_reads is None:
            index = self.facts.index
            self._closure_reads = {}
            for name in index.descendants(self.scope, cst.Name):
                owner = index.scopes[name]
                if owner is self.scope or not is_variable_read(name, index.parent(name)):
                    continue
                if isinstance(owner, cst.FunctionDef):
                    inner = self.facts.scope(owner)
                    if name.value in inner.params or name.value in inner.assignments:
                        continue
                elif isinstance(owner, cst.Lambda) and name.value in {p.name.value for p in all_params(owner.params)}:
                    continue
                self._closure_reads.setdefault(name.value, []).append(name)
        return self._closure_reads

    def _bind(self, target, node, value) -> None:
        if isinstance(target, cst.Name):
            self._add(target.value, node, value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            values = None
            if isinstance(value, (cst.Tuple, cst.List)) and len(value.elements) == len(target.elements):
                values = [e.value for e in value.elements]
            for i, element in enumerate(target.elements):
                self._bind(element.value, node, values[i] if values else value)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value, node, value)

    def _bind_loop(self, target, node, iterable) -> None:
        holds = Holds.NOTHING
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute):
            if iterable.func.attr.value in ("parameters", "named_parameters"):
                holds = Holds.PARAM
        for name in target_names(target):
            self._add(name, node, None, holds)

    # Queries ---------------------------------------------------------------

    @cached_property
    def _entries(self) -> List[Tuple[str, Tuple[int, cst.CSTNode, Optional[cst.BaseExpression], Holds]]]:
        """(name, entry) of every binding above, in the order of `flow`'s bits."""
        return [(name, entry) for name, entries in self.assignments.items() for entry in entries]

    @cached_property
    def flow(self) -> ScopeFlow:
        """This scope's control flow, with every binding above as one bit."""
        return ScopeFlow(self.facts.index, self.scope, [(name, entry[1]) for name, entry in self._entries])

    def _reaching_entries(self, name: str, at: cst.CSTNode) -> List[Tuple[int, cst.CSTNode, Optional[cst.BaseExpression], Holds]]:
        """The entries of `name` that may be what a read at `at` sees, along
        any path of the scope's control flow (loops included), latest first."""
        if name not in self.assignments:
            return []
        bits = self.flow.reaching(at, name)
        return sorted((self._entries[bit][1] for bit in bits), key=lambda entry: entry[0], reverse=True)

    def _carried(self, entry, at: cst.CSTNode) -> bool:
        """Whether `entry`, which reaches `at`, gets there only from a
        previous pass of a loop: it comes later in the source, or it is the
        statement `at` is in (`x = f(x)`), and not the loop's own target."""
        index = self.facts.index
        node = entry[1]
        if isinstance(node, cst.For) and index.is_inside(at, node.body):
            return False
        return entry[0] > index.order[at] or node is at or index.is_inside(at, node)

    def assignment_before(self, name: str, at: cst.CSTNode):
        """The entry of the last binding of `name`, in source order, of those
        that reach `at` on entering the loops around it (a `for` loop's
        target for a read in its body), or None."""
        for entry in self._reaching_entries(name, at):
            if not self._carried(entry, at):
                return entry
        return None

    def reaching(self, read: cst.CSTNode) -> List[Tuple[cst.CSTNode, Optional[cst.BaseExpression]]]:
        """(binding, value) of every binding of `read`'s name that may reach
        it, latest first: after `if c: z = f(x)` / `else: z = g(x)`, both;
        a `for` loop's target in its body. Not the ones that reach it only
        from a previous pass of a loop (`loop_carried`)."""
        name = read.value if isinstance(read, cst.Name) else ""
        return [(e[1], e[2]) for e in self._reaching_entries(name, read) if not self._carried(e, read)]

    def loop_carried(self, read: cst.Name) -> List[Tuple[cst.CSTNode, Optional[cst.BaseExpression]]]:
        """(binding, value) of the assignments of `read`'s name that reach it
        from the previous pass of a loop around it: later in the loop body
        and not left by `break` or `return`, or the statement around `read`
        itself (`total = total + loss`), and not overwritten on every pass
        before `read`."""
        return [(e[1], e[2]) for e in self._reaching_entries(read.value, read) if e[2] is not None and self._carried(e, read)]

    def reads_after(self, name: str, node: cst.CSTNode) -> List[cst.Name]:
        end = self.facts.index.end[node]
        return [read for read in self.reads.get(name, ()) if self.facts.index.order[read] >= end]

    def flows_from(self, seed: cst.CSTNode) -> Set[cst.CSTNode]:
        """The assignments after `seed` that carry its value (and graph) on:
        their value contains `seed`, or reads a name whose binding at that
        read is one of them. A read where the graph is cut (`.detach()`,
        `.item()`, `.argmax()`, `.shape`, ...) carries nothing."""
        index = self.facts.index
        start = index.order[seed]
        found: Set[cst.CSTNode] = set()
        changed = True
        while changed:
            changed = False
            for entries in self.assignments.values():
                for _, node, value, _ in entries:
                    if node in found or value is None or index.end[node] <= start:
                        continue  # done before `seed`
                    if value is seed or index.is_inside(seed, value) or self.reads_flow(value, found) or (
                        isinstance(node, cst.AugAssign) and self.reads_flow(node.target, found)
                    ):  # `logits /= t` carries on what `logits` held
                        found.add(node)
                        changed = True
        return found

    def reads_flow(self, expr: cst.CSTNode, flowing: Set[cst.CSTNode]) -> bool:
        """Whether `expr` reads, with its graph, a name bound by one of `flowing`."""
        index = self.facts.index
        for read in _reads_in(expr, index):
            if index.scopes.get(read) is not self.scope or graph_cut(read, index):
                continue
            if any(binding in flowing for binding, _ in self.reaching(read)):
                return True
        return False

    def derived_names(self, name: str, before: cst.CSTNode) -> List[str]:
        """Names assigned, before `before`, from expressions that read `name`."""
        index = self.facts.index
        found: List[str] = []
        frontier = [name]
        while frontier:
            source = frontier.pop()
            for other, entries in self.assignments.items():
                if other in found or other == name:
                    continue
                for order, node, value, _ in entries:
                    if order >= index.order[before] or value is None:
                        continue
                    if any(r.value == source for r in index.descendants(value, cst.Name)) or (
                        isinstance(value, cst.Name) and value.value == source
                    ):
                        found.append(other)
                        frontier.append(other)
                        break
        return found


def asks_for_grad(call: cst.Call) -> bool:
    """`x.requires_grad_()` or `x.requires_grad_(True)`: not `(False)` or
    a flag only known at run time."""
    if not call.args:
        return True
    value = call.args[0].value
    return len(call.args) == 1 and isinstance(value, cst.Name) and value.value == "True"


def grad_flag_set(statement: cst.BaseSmallStatement) -> Optional[str]:
    """The name a statement makes require grad in place:
    `x.requires_grad = True`, `x.requires_grad_()`."""
    if isinstance(statement, cst.Assign) and len(statement.targets) == 1:
        target = statement.targets[0].target
        value = statement.value
        if (
            isinstance(target, cst.Attribute)
            and target.attr.value == "requires_grad"
            and isinstance(target.value, cst.Name)
            and isinstance(value, cst.Name)
            and value.value == "True"
        ):
            return target.value.value
    if isinstance(statement, cst.Expr) and isinstance(statement.value, cst.Call):
        call = statement.value
        func = call.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "requires_grad_"
            and isinstance(func.value, cst.Name)
            and asks_for_grad(call)
        ):
            return func.value.value
    return None


def detached_read(name: cst.Name, index: FileIndex) -> bool:
    parent = index.parent(name)
    return isinstance(parent, cst.Attribute) and parent.value is name and parent.attr.value in ("detach", "data")


# What carries no graph on from its receiver: `x.detach()`, `x.item()`,
# `x.argmax()`, `x.shape`; `torch.argmax(x)`, `len(x)`, `x == y`.
_CUTTING_ATTRIBUTES = NO_GRAPH_METHODS | GRAPH_CUTTING_ATTRIBUTES | {"detach_"}


def graph_cut(read: cst.Name, index: FileIndex) -> bool:
    """Whether the graph of `read` stops within its expression."""
    child: cst.CSTNode = read
    for ancestor in index.ancestors(read):
        if isinstance(ancestor, (cst.BaseStatement, cst.BaseSmallStatement, cst.Lambda)):
            return False
        if isinstance(ancestor, cst.Attribute) and ancestor.value is child and ancestor.attr.value in _CUTTING_ATTRIBUTES:
            return True
        if isinstance(ancestor, cst.Comparison):
            return True
        if isinstance(ancestor, cst.Call) and child is not ancestor.func:
            func = ancestor.func
            if isinstance(func, cst.Name) and func.value in INSPECTING_BUILTINS:
                return True
            if isinstance(func, cst.Attribute) and func.attr.value in INDEX_METHODS:
                return True
        child = ancestor
    return False


def _reads_in(expr: cst.CSTNode, index: FileIndex) -> Iterator[cst.Name]:
    if isinstance(expr, cst.Name):
        yield expr
    yield from index.descendants(expr, cst.Name)


def branched(node: cst.CSTNode, function: cst.CSTNode, index: FileIndex) -> bool:
    """Whether an `if`, `try` or conditional expression inside `function` decides whether `node` runs."""
    for ancestor in index.ancestors(node):
        if ancestor is function:
            return False
        if isinstance(ancestor, (cst.If, cst.Else, cst.Try, cst.IfExp)):
            return True
    return False


class ValueFacts:
    def __init__(
        self, index: FileIndex, names: ImportTable, modules: ModuleFacts, grad_mode: GradMode, intent: "Intent", interpreter=None
    ) -> None:
        self.intent = intent
        # The interpreter, asked before a name decides what a value holds.
        self._interpreter = interpreter
        self.index = index
        self.names = names
        self.modules = modules
        self.grad_mode = grad_mode
        self._scopes: Dict[cst.CSTNode, ScopeValues] = {}
        self._cache: Dict[cst.CSTNode, Holds] = {}
        self._busy: set = set()
        self._hook_outputs: Optional[Set[cst.Param]] = None
        self._stored: Dict[Tuple[cst.CSTNode, str], List[cst.BaseExpression]] = {}
        self._stored_functions: Dict[cst.ClassDef, Dict[str, str]] = {}
        self._self_assignments: Dict[cst.ClassDef, Dict[str, list]] = {}
        self._call_sites: Optional[Dict[cst.FunctionDef, List[cst.Call]]] = None
        self._instance_calls: Optional[Dict[cst.FunctionDef, List[cst.Call]]] = None
        self._call_flags: Dict[cst.CSTNode, Dict[str, List[cst.CSTNode]]] = {}
        self._tensor_stores: Dict[cst.ClassDef, Dict[str, List[cst.Assign]]] = {}
        self._flaggers: Optional[Dict[cst.FunctionDef, List[cst.Param]]] = None
        self._across_calls = None
        self._file_functions: Dict[cst.Call, List[cst.FunctionDef]] = {}
        self._defined_names = {n.name.value for n in index.nodes(cst.FunctionDef)}
        self._defined_names |= {n.name.value for n in index.nodes(cst.ClassDef)}
        self._defined_names |= set(names.aliases)

    def defines(self, name: str) -> bool:
        """Whether the file binds `name` with `def`, `class` or `import`."""
        return name in self._defined_names

    @cached_property
    def class_methods(self) -> Set[str]:
        """Names of the methods the file's classes define (`def detach(self)`
        of a decoder state): a call of one on a value of unknown type may be
        the file's own method, not the tensor method of the same name."""
        return {
            statement.name.value
            for klass in self.index.nodes(cst.ClassDef)
            for statement in klass.body.body
            if isinstance(statement, cst.FunctionDef)
        }

    def scope(self, node: cst.CSTNode) -> ScopeValues:
        scope = node if isinstance(node, (cst.FunctionDef, cst.Module)) else self.index.scope_of(node)
        if scope not in self._scopes:
            self._scopes[scope] = ScopeValues(self, scope)
        return self._scopes[scope]

    @property
    def hook_outputs(self) -> Set[cst.Param]:
        """The parameters that receive a module's output in the forward
        hooks of this file: `output` of `hook(module, input, output)` given
        to `register_forward_hook`, directly, as `self.hook`, or returned by
        a file function (`register_forward_hook(self._save(name))`)."""
        if self._hook_outputs is None:
            self._hook_outputs = set()
            for call in self.index.nodes(cst.Call):
                func = call.func
                if not isinstance(func, cst.Attribute) or func.attr.value != "register_forward_hook" or not call.args:
                    continue
                with_kwargs = any(
                    a.keyword is not None and a.keyword.value == "with_kwargs" and dotted(a.value) == "True" for a in call.args
                )
                for hook in self._functions_given(call.args[0].value):
                    params = [*hook.params.posonly_params, *hook.params.params]
                    if isinstance(self.index.parent(self.index.parent(hook)), cst.ClassDef):
                        params = params[1:]  # `self`
                    position = 3 if with_kwargs else 2
                    if len(params) > position:
                        self._hook_outputs.add(params[position])
        return self._hook_outputs

    def _functions_given(self, expr: cst.BaseExpression) -> List[cst.FunctionDef]:
        """The file functions `expr` stands for as a callable: `hook`,
        `self.hook`, or `make_hook(name)` returning a nested `def`."""
        if isinstance(expr, cst.Name):
            return [f for f in self.intent.functions_named(expr.value) if self.index.scope_of(f) is self.index.scope_of(expr) or self.index.scope_of(f) is self.index.module]
        if isinstance(expr, cst.Attribute) and self.index.is_receiver(expr.value):
            return self.intent.functions_named(expr.attr.value)
        if isinstance(expr, cst.Call):
            found = []
            for maker in self.file_functions(expr):
                for returned in self.index.descendants(maker.body, cst.Return):
                    if isinstance(returned.value, cst.Name) and self.index.scope_of(returned) is maker:
                        found += [
                            f for f in self.index.descendants(maker.body, cst.FunctionDef)
                            if f.name.value == returned.value.value and self.index.scope_of(f) is maker
                        ]
            return found
        return []

    def stored_in(self, container: cst.BaseExpression) -> List[cst.BaseExpression]:
        """What the class around `container` (`self.outputs`) stores in it
        anywhere, hooks included: `self.outputs[k] = v`, `self.outputs.append(v)`."""
        key = dotted(container)
        klass = self.index.enclosing(container, cst.ClassDef)
        if key is None or not self.index.is_receiver(getattr(container, "value", None)) or key.count(".") != 1 or klass is None:
            return []
        if (klass, key) not in self._stored:
            found: List[cst.BaseExpression] = []
            for assign in self.index.descendants(klass, cst.Assign):
                for target in assign.targets:
                    if isinstance(target.target, cst.Subscript) and dotted(target.target.value) == key:
                        found.append(assign.value)
            for call in self.index.descendants(klass, cst.Call):
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value == "append" and dotted(func.value) == key and call.args:
                    found.append(call.args[0].value)
            self._stored[(klass, key)] = found
        return self._stored[(klass, key)]

    def iterated_contents(self, loop: cst.For, name: str) -> List[cst.BaseExpression]:
        """What `name`, a target of `loop`, takes from a container of the
        class: `for y in self.outputs`, `.values()`, `for k, y in self.outputs.items()`."""
        iterable = loop.iter
        position = None
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute) and not iterable.args:
            method = iterable.func.attr.value
            if method in ("items", "values"):
                position = 1 if method == "items" else None
                iterable = iterable.func.value
            else:
                return []
        target = loop.target
        if position is not None:
            if not isinstance(target, (cst.Tuple, cst.List)) or len(target.elements) != 2:
                return []
            target = target.elements[position].value
        if not isinstance(target, cst.Name) or target.value != name:
            return []
        return self.stored_in(iterable)

    def param_holds(self, param: cst.Param) -> Holds:
        if param in self.hook_outputs:
            return Holds.ACTIVATION  # a module's output, computed by its forward
        if param.annotation is not None:
            name = self.names.qualified(param.annotation.annotation) or ""
            if self.modules._is_nn_class(name) or name == "torch.nn.Module":
                return Holds.MODEL
            if name.startswith("torch.optim."):
                return Holds.OPTIMIZER
        seen = self._seen_module(param.name)
        if seen:
            return self._module_role(param.name, param.name.value)
        if self._interpreter is not None and self._interpreter().holds_optimizer(param.name):
            return Holds.OPTIMIZER
        by_name = _holds_by_name(param.name.value)
        if seen is False and by_name == Holds.MODEL:
            return Holds.NOTHING  # seen to hold something else: the name cannot make it a model
        return by_name

    def _module_role(self, node: cst.CSTNode, name: str) -> Holds:
        """A module the interpreter saw: a criterion when it is one of torch's
        loss classes (or the name says so: a criterion is a module too), else a model."""
        if self._interpreter().holds_torch_loss(node) or CRITERION_NAME.fullmatch(name):
            return Holds.CRITERION
        return Holds.MODEL

    def _seen_module(self, node: cst.CSTNode) -> Optional[bool]:
        """What the interpreter saw `node` hold: a module (True), something
        else it can tell (False), or None; evidence before any name."""
        if self._interpreter is None:
            return None
        return self._interpreter().holds_module(node)

    def backward_target(self, call: cst.Call) -> Optional[cst.BaseExpression]:
        """The tensor `call` backpropagates from: `x` in `x.backward()` and
        `torch.autograd.backward(x)`; None for any other call."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value != "backward":
            return None  # most calls; asked of every call by several rules
        qualified = self.names.qualified(func)
        if qualified == "torch.autograd.backward":
            return call.args[0].value if call.args and call.args[0].keyword is None else None
        if isinstance(func, cst.Attribute) and qualified is None:
            return func.value
        return None

    def backward_reached_alone(self, call: cst.Call, depth: int = 0) -> Optional[cst.Call]:
        """The `backward()` that what `call` computes reaches with nothing
        else in its graph, only plain data beside it: in `call`'s function,
        or through the values that function returns to the file's callers of
        it (`reps = out.hidden_states[-1]; return F.normalize(reps)`, then
        `q = self.encode(a); p = self.encode(b); return F.cross_entropy(q @ p.T, target)`,
        then `loss = model(a, b); loss.backward()`), up to three levels up.
        Other calls of the same function in a caller count as the same value."""
        index = self.index
        scope = self.scope(call)
        seeds = [call]
        function = index.scope_of(call)
        if depth and isinstance(function, cst.FunctionDef):
            for callee in self.file_functions(call) or self.intent.methods_called(call) or []:
                seeds = [s for s in self.callers(callee) if index.scope_of(s) is function] or seeds
                break
        flowing: Set[cst.CSTNode] = set()
        for seed in seeds:
            flowing |= scope.flows_from(seed)
        pure: Set[cst.CSTNode] = set()  # assignments carrying the value and nothing else with a graph
        for assignment in sorted(flowing, key=lambda a: index.order[a]):
            value = getattr(assignment, "value", None)
            if value is not None and not isinstance(assignment, cst.AugAssign) and self._only_from(value, seeds, pure, scope):
                pure.add(assignment)
        flowing = pure
        for seed in seeds:
            for backward in self.backwards_from(seed):
                target = self.backward_target(backward)
                if target is not None and self._only_from(target, seeds, flowing, scope):
                    return backward
        if depth >= 3 or not isinstance(function, cst.FunctionDef):
            return None
        returns = [r for r in index.descendants(function.body, cst.Return) if index.scope_of(r) is function and r.value is not None]
        if not any(self._only_from(r.value, seeds, flowing, scope) for r in returns):
            return None
        for site in self.callers(function):
            if self.grad_mode.is_disabled(site):
                continue
            found = self.backward_reached_alone(site, depth + 1)
            if found is not None:
                return found
        return None

    def _only_from(self, expr: cst.BaseExpression, seeds: List[cst.Call], flowing: Set[cst.CSTNode], scope: ScopeValues) -> bool:
        """Whether `expr` carries the value of `seeds` (directly or through
        names bound by `flowing`) and no other graph: its other reads are
        plain data, numbers, settings."""
        index = self.index
        carried = any(expr is s or index.is_inside(s, expr) for s in seeds)
        for call in [expr, *index.descendants(expr, cst.Call)]:
            if not isinstance(call, cst.Call) or any(call is s or index.is_inside(call, s) for s in seeds):
                continue
            if self.names.qualified(call.func) is None and not isinstance(call.func, cst.Attribute):
                return False  # `lm(ids)`, `helper(x)`: may well carry a graph
            if isinstance(call.func, cst.Attribute) and self.names.qualified(call.func) is None:
                receiver = call.func.value
                while isinstance(receiver, (cst.Attribute, cst.Subscript, cst.Call)):
                    receiver = receiver.func if isinstance(receiver, cst.Call) else receiver.value
                if self.index.is_receiver(receiver) and not any(index.is_inside(call, s) for s in seeds):
                    return False  # `self.helper(x)`: a method of the model
        for read in _reads_in(expr, index):
            if index.scopes.get(read) is not scope.scope or not is_variable_read(read, index.parent(read)):
                continue
            if any(index.is_inside(read, s) for s in seeds) or graph_cut(read, index):
                continue
            if any(binding in flowing for binding, _ in scope.reaching(read)):
                carried = True  # on the path through the seed's binding, whatever other branches bind
                continue
            parent = index.parent(read)
            # `self.temperature`: what the attribute holds, not `self`.
            held = self.holds(parent) if isinstance(parent, cst.Attribute) and parent.value is read else self.holds(read)
            if held & (GRAD | Holds.MODEL):
                return False
        return carried

    def backwards_from(self, seed: cst.CSTNode) -> List[cst.Call]:
        """The backward calls after `seed`, in its scope, that start from a
        tensor computed from `seed` (through names, not through `.detach()`)."""
        index = self.index
        scope = self.scope(seed)
        flowing = scope.flows_from(seed)
        found = []
        for call in index.descendants(index.scope_of(seed), cst.Call):
            target = self.backward_target(call)
            if target is None or not index.before(seed, call):
                continue
            if target is seed or index.is_inside(seed, target) or scope.reads_flow(target, flowing):
                found.append(call)
        return found

    def file_functions(self, call: cst.Call) -> List[cst.FunctionDef]:
        """The functions of this file `call` runs: `f(...)` and `self.f(...)`
        (resolved by `intent.helpers_called`), and `crit(...)` for
        `crit = Loss(...)` of a class here with `__call__` or `forward`.
        Asked of the same calls by many rules: kept per call."""
        found = self._file_functions.get(call)
        if found is None:
            found = self._file_functions[call] = self._find_file_functions(call)
        return found

    def _find_file_functions(self, call: cst.Call) -> List[cst.FunctionDef]:
        direct = self.intent.helpers_called(call)
        if not direct and isinstance(call.func, cst.Attribute):
            return self._stored_function(call.func)
        if direct or not isinstance(call.func, cst.Name) or not self._callable_classes:
            return direct  # no class here that `crit(...)` could be an instance of
        entries = self.scope(call.func).assignments.get(call.func.value, [])
        if len(entries) != 1 or not isinstance(entries[0][2], cst.Call):
            return []
        made_by = entries[0][2].func
        if not isinstance(made_by, cst.Name):
            return []
        for klass in self.index.nodes(cst.ClassDef):
            if klass.name.value == made_by.value:
                return [
                    f for f in klass.body.body
                    if isinstance(f, cst.FunctionDef) and f.name.value in ("__call__", "forward")
                ][:1]
        return []

    def forced_on_return(self, call: cst.Call) -> Optional[cst.CSTNode]:
        """The statement in a function of the file `call` runs that forces
        `requires_grad` on the name the function returns
        (`loss.requires_grad_(True)` ... `return loss`): a value computed
        with autograd off then comes back as a new leaf, and a backward on
        it runs without raising, reaching nothing."""
        index = self.index
        for function in self.file_functions(call):
            returned = {r.value.value for r in index.descendants(function, cst.Return) if isinstance(r.value, cst.Name)}
            if not returned:
                continue
            for node in index.descendants(function, cst.Call):
                func = node.func
                if (
                    isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_"
                    and isinstance(func.value, cst.Name) and func.value.value in returned
                    and (not node.args or _is_true_literal(node.args[0].value))
                ):
                    return node
            for node in index.descendants(function, cst.Assign):
                target = node.targets[0].target if len(node.targets) == 1 else None
                if (
                    isinstance(target, cst.Attribute) and target.attr.value == "requires_grad"
                    and isinstance(target.value, cst.Name) and target.value.value in returned
                    and _is_true_literal(node.value)
                ):
                    return node
        return None

    @cached_property
    def _callable_classes(self) -> bool:
        """Whether a class of this file defines `__call__` or `forward`."""
        return any(
            isinstance(f, cst.FunctionDef) and f.name.value in ("__call__", "forward")
            for klass in self.index.nodes(cst.ClassDef) for f in klass.body.body
        )

    def _stored_function(self, func: cst.Attribute) -> List[cst.FunctionDef]:
        """`self.to_matrix(...)` after `self.to_matrix = to_matrix` in the
        class: the module-level function of this file stored on the instance."""
        if not (self.index.is_receiver(func.value)):
            return []
        klass = self.index.enclosing(func, cst.ClassDef)
        if klass is None:
            return []
        if klass not in self._stored_functions:
            stored: Dict[str, str] = {}
            for assign in self.index.descendants(klass, cst.Assign):
                target = assign.targets[0].target if len(assign.targets) == 1 else None
                if (
                    isinstance(target, cst.Attribute) and self.index.is_receiver(target.value)
                    and isinstance(assign.value, cst.Name)
                ):
                    local = self.scope(assign)  # `self.act = act` with `act` a parameter is not the global
                    if assign.value.value not in local.params and assign.value.value not in local.assignments:
                        stored[target.attr.value] = assign.value.value
            self._stored_functions[klass] = stored
        name = self._stored_functions[klass].get(func.attr.value)
        if name is None:
            return []
        found = [f for f in self.intent.functions_named(name) if self.index.scope_of(f) is self.index.module]
        return found if len(found) == 1 else []

    def call_sites(self, function: cst.FunctionDef) -> List[cst.Call]:
        """The calls of the file that run `function`: as `file_functions`
        resolves them, `Class.method(...)` for a class of the file, and
        `self.block(x)` or `model(x)` for the `forward` of a module class of
        the file they were built from."""
        if self._call_sites is None:
            self._call_sites = {}
            classes = {c.name.value: c for c in self.index.nodes(cst.ClassDef)}
            for call in self.index.nodes(cst.Call):
                callees = list(self.file_functions(call))
                func = call.func
                if not callees and isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in classes:
                    for klass in self.intent.class_chain(classes[func.value.value]):
                        found = [f for f in klass.body.body if isinstance(f, cst.FunctionDef) and f.name.value == func.attr.value]
                        if found:
                            callees = found
                            break
                if not callees:
                    forward = self.forward_called(call)
                    callees = [forward] if forward is not None else []
                for callee in callees:
                    self._call_sites.setdefault(callee, []).append(call)
        return self._call_sites.get(function, [])

    def arguments_for(self, param: cst.Param) -> List[cst.BaseExpression]:
        """What the file's calls of the function pass for `param`: by
        position (after `self`/`cls` of a method) or by keyword. A call that
        unpacks `*args`/`**kwargs` before it tells nothing and is left out."""
        function = self.index.enclosing(param, cst.FunctionDef)
        if function is None or param.star == "**":
            return []
        positional = list(function.params.posonly_params) + list(function.params.params)
        if positional and positional[0].name.value == self.index.instance_param(function):
            positional = positional[1:]
        rest = param.star == "*"  # `*arrays`: what is passed past the named ones
        found = []
        for call in self.call_sites(function):
            position = 0
            for arg in call.args:
                if arg.star == "*" and rest:
                    found.append(arg.value)  # `f(*maps)`: the elements of `maps`
                    continue
                if arg.star:
                    break
                if arg.keyword is None:
                    if rest and position >= len(positional):
                        found.append(arg.value)
                    elif position < len(positional) and positional[position] is param:
                        found.append(arg.value)
                    position += 1
                elif arg.keyword.value == param.name.value:
                    found.append(arg.value)
        return found

    def passed_object(self, name: cst.Name) -> Holds:
        """MODEL, OPTIMIZER or CRITERION when `name` reads a parameter of its
        function that every call of the file passes one of: `opt` in
        `def train_step(model, opt)` called as `train_step(net, AdamW(...))`."""
        function = self.index.scope_of(name)
        if not isinstance(function, cst.FunctionDef) or self.scope(function).assignment_before(name.value, name):
            return Holds.NOTHING
        param = next((p for p in all_params(function.params) if p.name.value == name.value), None)
        if param is None:
            return Holds.NOTHING
        found = None
        for value in self.arguments_for(param):
            kind = self.holds(value) & (Holds.MODEL | Holds.OPTIMIZER | Holds.CRITERION)
            if not kind or (found is not None and kind != found):
                return Holds.NOTHING
            found = kind
        return found or Holds.NOTHING

    def forward_called(self, call: cst.Call) -> Optional[cst.FunctionDef]:
        """The `forward` of a module class of this file that `call` runs:
        `model(x)` with `model = SeqNet()` the one binding of `model`,
        `self.head(x)` for a member built from such a class."""
        func = call.func
        made_by = None
        if isinstance(func, cst.Name):
            entries = self.scope(func).assignments.get(func.value, [])
            if len(entries) == 1 and entries[0][0] < self.index.order[call] and isinstance(entries[0][2], cst.Call):
                made_by = entries[0][2]
            elif len(entries) == 1 and isinstance(entries[0][1], cst.For) and entries[0][2] is None:
                made_by = self._list_element_built_by(entries[0][1], func.value)
        elif isinstance(func, cst.Attribute) and self.index.is_receiver(func.value):
            owner = self.modules.class_of(func)
            member = owner.members.get(func.attr.value) if owner is not None else None
            if member is not None and isinstance(member.value, cst.Call):
                made_by = member.value
        if made_by is None:
            return None
        klass = self.modules.module_class_named(dotted(made_by.func) or "")
        return klass.methods.get("forward") if klass is not None else None

    def class_passed(self, name: cst.Name, depth: int = 0) -> Optional[cst.ClassDef]:
        """The module class of this file whose instance `name` holds: its one
        binding is `Finetune(...)`, or it is a parameter of its function for
        which every call in the file passes such an instance, through the
        parameters of the callers (`evaluate(model)` passing its own `model`
        on to `evaluate_on_one_task(model, ...)`)."""
        if depth > 4:
            return None
        scope = self.scope(name)
        entries = scope.assignments.get(name.value, [])
        if entries:
            value = entries[0][2]
            if len(entries) != 1 or not isinstance(value, cst.Call) or unpacked_position(entries[0][1], name.value) is not None:
                return None
            klass = self.modules.module_class_named(dotted(value.func) or "")
            return klass.node if klass is not None else None
        function = scope.scope
        if not isinstance(function, cst.FunctionDef):
            return None
        param = next((p for p in all_params(function.params) if p.name.value == name.value), None)
        if param is None:
            return None
        found: Set[cst.ClassDef] = set()
        for argument in self.arguments_for(param):
            if isinstance(argument, cst.Call):  # `train(EncoderModel(lm), ...)`
                built = self.modules.module_class_named(dotted(argument.func) or "")
                klass = built.node if built is not None else None
            else:
                klass = self.class_passed(argument, depth + 1) if isinstance(argument, cst.Name) else None
            if klass is None:
                return None
            found.add(klass)
        return found.pop() if len(found) == 1 else None

    def callers(self, function: cst.FunctionDef) -> List[cst.Call]:
        """`call_sites`, and for a module's `forward` also the calls
        `model(x)` of a `model` parameter that holds an instance of its class
        (`class_passed`) and `Padding(size)(x)` of an instance built on the spot."""
        defined_in = self.index.scope_of(function)
        sites = []
        for site in self.call_sites(function):
            if isinstance(site.func, cst.Name):
                local = self.scope(site)
                if local.scope is not defined_in and (site.func.value in local.params or site.func.value in local.assignments):
                    continue  # `closure()` of a parameter `closure`: whatever the caller passed
                if isinstance(defined_in, cst.FunctionDef) and not self.index.is_inside(site, defined_in):
                    continue  # a nested `def` is only reached by that name from its own function
            sites.append(site)
        if function.name.value != "forward":
            return sites
        if self._instance_calls is None:
            self._instance_calls = {}
            for call in self.index.nodes(cst.Call):
                klass = None
                if isinstance(call.func, cst.Name) and not self.scope(call.func).assignments.get(call.func.value):
                    klass = self.class_passed(call.func)
                elif isinstance(call.func, cst.Call):  # `CenterPadding(size)(x)`: built and called at once
                    built = self.modules.module_class_named(dotted(call.func.func) or "")
                    klass = built.node if built is not None else None
                for base in self.intent.class_chain(klass) if klass is not None else ():
                    forward = next((f for f in base.body.body if isinstance(f, cst.FunctionDef) and f.name.value == "forward"), None)
                    if forward is not None:  # the nearest `forward` runs
                        self._instance_calls.setdefault(forward, []).append(call)
                        break
        return sites + [call for call in self._instance_calls.get(function, ()) if call not in sites]

    def caller_without_grad(self, function: cst.FunctionDef, depth: int = 0) -> Optional[Tuple[cst.Call, cst.CSTNode]]:
        """The `with`, decorated function or switch that certainly turns
        autograd off around a call chain of the file reaching `function`
        (`evaluate()` calling `evaluate_on_one_task(model, ...)` inside
        `with torch.no_grad():`, which calls `model(x)`), when no `if` of
        the chain decides whether the call happens; None otherwise. Unlike
        `grad_mode.is_disabled`, one such caller suffices. Returned with
        the call of the chain that runs with autograd off."""
        if depth > 4:
            return None
        for site in self.callers(function):
            mode = self.grad_mode.mode_at(site)
            if mode is Mode.DISABLED:
                source = self.grad_mode.disabled_by(site)
                return (site, source) if source is not None else None
            caller = self.index.enclosing(site, cst.FunctionDef)
            if mode is not None or caller is None or caller is function or branched(site, caller, self.index):
                continue
            found = self.caller_without_grad(caller, depth + 1)
            if found is not None:
                return found
        return None

    def _list_element_built_by(self, loop: cst.For, name: str) -> Optional[cst.Call]:
        """`Block(dim)` for `name` in `for block in self.blocks`, `zip(self.blocks,
        ...)` or `enumerate(self.blocks)`, when the member `blocks` is an
        `nn.ModuleList` built from one class: `[Block(dim) for _ in range(n)]`."""
        target, iterable = loop.target, loop.iter
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.func.value in ("zip", "enumerate"):
            if not isinstance(target, (cst.Tuple, cst.List)):
                return None
            names = [e.value.value if isinstance(e.value, cst.Name) else None for e in target.elements]
            if name not in names:
                return None
            position = names.index(name) - (1 if iterable.func.value == "enumerate" else 0)
            if position < 0 or position >= len(iterable.args) or iterable.args[position].star:
                return None
            iterable = iterable.args[position].value
        elif not (isinstance(target, cst.Name) and target.value == name):
            return None
        if not (isinstance(iterable, cst.Attribute) and self.index.is_receiver(iterable.value)):
            return None
        owner = self.modules.class_of(iterable)
        member = owner.members.get(iterable.attr.value) if owner is not None else None
        built = member.value if member is not None else None
        if not (isinstance(built, cst.Call) and (self.names.qualified(built.func) or "").endswith(".ModuleList") and built.args):
            return None
        elements = built.args[0].value
        if isinstance(elements, cst.ListComp):
            made = [elements.elt]
        elif isinstance(elements, (cst.List, cst.Tuple)):
            made = [e.value for e in elements.elements]
        else:
            return None
        classes = {dotted(m.func) if isinstance(m, cst.Call) else None for m in made}
        return made[0] if len(classes) == 1 and None not in classes and isinstance(made[0], cst.Call) else None

    def output_entries(self, expr: cst.Subscript) -> Optional[List[cst.BaseExpression]]:
        """What the forward of a module of this file puts under the string
        key of `expr` (`out["boxes"]` for `out = model(x)` or `model(x)[0]`):
        the values of that key in its dict literals and `d["boxes"] = v`
        stores. None when the output does not come from such a forward, or
        it never names the key."""
        key = string_key(expr)
        if key is None:
            return None
        source = expr.value
        for _ in range(4):  # through names and `[0]`-style indexing of the output
            if isinstance(source, cst.Subscript):
                source = source.value
            elif isinstance(source, cst.Name):
                entries = self.scope(source).assignments.get(source.value, [])
                reaching = [e for e in entries if e[0] < self.index.order[source]]
                if len(reaching) != 1 or reaching[0][2] is None or unpacked_position(reaching[0][1], source.value) is not None:
                    return None
                source = reaching[0][2]
            else:
                break
        forward = self.forward_called(source) if isinstance(source, cst.Call) else None
        if forward is None:
            return None
        found: List[cst.BaseExpression] = []
        for element in self.index.descendants(forward.body, cst.DictElement):
            if isinstance(element.key, cst.SimpleString) and element.key.evaluated_value == key:
                found.append(element.value)
        for target in self.index.descendants(forward.body, cst.AssignTarget):
            t = target.target
            if isinstance(t, cst.Subscript) and string_key(t) == key:
                found.append(self.index.parent(target).value)
        return found or None

    def returned_object(self, call: cst.BaseExpression, position: Optional[int]) -> Holds:
        """MODEL, OPTIMIZER or CRITERION when every return of the file
        function `call` runs builds one (at `position` of a returned tuple):
        `model, opt = build_model()` with `return model, SGD(...)`. Objects
        only: what a tensor holds depends on the arguments of each call."""
        if not isinstance(call, cst.Call):
            return Holds.NOTHING
        functions = self.file_functions(call)
        if len(functions) != 1:
            return Holds.NOTHING
        function = functions[0]
        returns = [r for r in self.index.descendants(function.body, cst.Return) if self.index.scope_of(r) is function]
        found = None
        for returned in returns:
            value = returned.value
            if value is None:
                return Holds.NOTHING
            if position is not None:
                if not isinstance(value, cst.Tuple) or position >= len(value.elements):
                    return Holds.NOTHING
                value = value.elements[position].value
            kind = self.holds(value) & (Holds.MODEL | Holds.OPTIMIZER | Holds.CRITERION)
            if not kind or (found is not None and kind != found):
                return Holds.NOTHING
            found = kind
        return found or Holds.NOTHING

    def grad_requested(self, name: str, scope: cst.CSTNode) -> bool:
        """Whether a backward in `scope` names `name` in its `inputs=`:
        `b.backward(inputs=[a])` fills `a.grad` even when `a` is no leaf."""
        for call in self.index.descendants(scope, cst.Call):
            if self.backward_target(call) is None:
                continue
            for arg in call.args:
                if arg.keyword is None or arg.keyword.value != "inputs":
                    continue
                value = arg.value
                elements = [e.value for e in value.elements] if isinstance(value, (cst.List, cst.Tuple)) else [value]
                if any(dotted(element) == name for element in elements):
                    return True
        return False

    def frozen_model(self, expr: cst.BaseExpression) -> bool:
        """Whether `expr` is an instance of a module class of this file that
        freezes all its parameters in its constructor: calling it records no
        graph beyond what its inputs carry."""
        if not self.modules.any_frozen_at_construction:
            return False  # most files: no class to look for
        klass = self.across_calls.instance_class(expr)
        return klass is not None and self.modules.frozen_at_construction(klass)

    def module_parameter(self, expr: cst.BaseExpression) -> bool:
        """Whether `expr` is the `.weight` or `.bias` of a submodule reached
        from a model through attributes and indexing (`model.fc.weight`,
        `self.encoder.layer[0].dense.bias`): a trainable parameter, unless
        the file turns off `requires_grad` somewhere along the way."""
        if not isinstance(expr, cst.Attribute) or expr.attr.value not in ("weight", "bias"):
            return False
        chain: List[str] = []
        node = expr.value
        while isinstance(node, (cst.Attribute, cst.Subscript)):
            if isinstance(node, cst.Attribute):
                chain.append(node.attr.value)
            node = node.value
        if not isinstance(node, cst.Name) or not chain or not self.holds(node) & Holds.MODEL:
            return False  # `self.weight`: a member, whatever it holds; `conv.weight`: see the caller
        chain.append(node.value)
        if set(chain) & self.modules.frozen_names:
            return False
        if self.index.is_receiver(node):
            owner = self.modules.class_of(node)
            member = owner.members.get(chain[-2]) if owner is not None else None
            if member is not None and (member.kind != "module" or chain[-2] not in owner.trainable_members()):
                return False
        return not self._freezes_in_scope(expr)

    def _freezes_in_scope(self, node: cst.CSTNode) -> bool:
        """Whether the function around `node` turns `requires_grad` off on anything."""
        scope = self.index.scope_of(node)
        for call in self.index.descendants(scope, cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_" and call.args and not asks_for_grad(call):
                return True
        for assign in self.index.descendants(scope, cst.Assign):
            target = assign.targets[0].target
            if isinstance(target, cst.Attribute) and target.attr.value == "requires_grad" and not (
                isinstance(assign.value, cst.Name) and assign.value.value == "True"
            ):
                return True
        return False

    def backpropagated_after(self, name: cst.Name, after: cst.CSTNode) -> bool:
        """Whether the value `name` holds is backpropagated after `after`:
        backward on it, or on something computed from it. "In the graph",
        proven by use."""
        scope = self.scope(name)
        entry = scope.assignment_before(name.value, name)
        if entry is None or entry[2] is None:
            return False
        return any(self.index.before(after, call) for call in self.backwards_from(entry[2]))

    def computed_without_graph(self, expr: cst.BaseExpression) -> bool:
        """True only when every input of `expr` is known to carry no graph:
        `.detach()`, `.data`, numbers, torch factories without
        `requires_grad=True`, and what is computed from them, followed
        through names, containers, parameters and the file's calls
        (`analysis/across_calls.py`). Unknown is False."""
        return self.across_calls.without_graph(expr)

    def from_new_values(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether `expr` is computed only from new values (`torch.rand(3)`,
        numbers) through arithmetic and names: nothing in it ever had a
        graph, so nothing was cut either."""
        if depth > 3:
            return False
        if isinstance(expr, (cst.Integer, cst.Float)):
            return True
        if isinstance(expr, cst.BinaryOperation):
            return self.from_new_values(expr.left, depth + 1) and self.from_new_values(expr.right, depth + 1)
        if isinstance(expr, cst.Call):
            return self.names.qualified(expr.func) in NEW_VALUE_FUNCTIONS
        if isinstance(expr, cst.Name):
            entry = self.scope(expr).assignment_before(expr.value, expr)
            return entry is not None and entry[2] is not None and self.from_new_values(entry[2], depth + 1)
        return False

    @property
    def across_calls(self) -> "AcrossCalls":
        """Graph-free values, what tensors hold and the classes of objects,
        followed across the file's calls."""
        if self._across_calls is None:
            from detachlint.analysis.across_calls import AcrossCalls

            self._across_calls = AcrossCalls(self)
        return self._across_calls

    # The core evaluation --------------------------------------------------

    def holds(self, expr: cst.CSTNode) -> Holds:
        """What `expr` evaluates to, as far as the file tells."""
        if expr in self._cache:
            return self._cache[expr]
        if expr in self._busy:
            return Holds.NOTHING
        self._busy.add(expr)
        try:
            result = self._evaluate(expr)
        finally:
            self._busy.discard(expr)
        self._cache[expr] = result
        return result

    def name_holds(self, name: str, at: cst.CSTNode) -> Holds:
        entry = None
        scope_node = self.index.scope_of(at)
        # Innermost scope first, then enclosing functions, then the module.
        while entry is None:
            scope = self.scope(scope_node)
            entry = scope.assignment_before(name, at)
            if entry is None and name == self.index.receiver(at) and name in scope.params and self.modules.class_of(at) is not None:
                return Holds.MODEL  # a module's own method: `self(x)` runs its forward
            if entry is None and name in scope.params:
                return self._flagged(scope, name, None, at, scope.params[name])
            if scope_node is self.index.module:
                break
            scope_node = self.index.scope_of(scope_node)
        if entry is None:
            if name == self.index.receiver(at) and self.modules.class_of(at) is not None:
                return Holds.MODEL
            if name in self._defined_names:
                return Holds.NOTHING  # a function, class or import, not a model
            return _holds_by_name(name)
        _, node, value, holds = entry
        result = self._flagged(scope, name, node, at, self.binding_holds(name, node, value, holds))
        others = [e for e in scope._reaching_entries(name, at) if e is not entry and not scope._carried(e, at)]
        for _, node, value, holds in others:
            # Another path's binding: a graph on any path may reach `at`; a cut
            # holds only when every path made it.
            result = joined(result, self._flagged(scope, name, node, at, self.binding_holds(name, node, value, holds)))
        return result

    def _flagged(self, scope: ScopeValues, name: str, binding: Optional[cst.CSTNode], at: cst.CSTNode, result: Holds) -> Holds:
        """`result`, unless `x.requires_grad = True` or `x.requires_grad_()`
        ran between `binding` and `at` on a tensor without graph: that makes
        it a leaf that requires grad (on a computed tensor it changes nothing,
        or raises)."""
        flags = [*scope.grad_flags.get(name, ()), *self.call_flags(scope.scope).get(name, ())]
        if not flags or result & (GRAD | Holds.MODEL | Holds.OPTIMIZER | Holds.CRITERION):
            return result
        start = self.index.order[binding] if binding is not None else -1
        order = self.index.order[at]
        if any(start < self.index.order[flag] and self.index.end[flag] <= order for flag in flags) or any(
            self._flagged_on_loop_back(scope, name, binding, flag, at) for flag in flags
        ):
            return (result & ~(Holds.DETACHED | Holds.DATA | Holds.NUMBER)) | Holds.LEAF
        return result

    def _flagged_on_loop_back(self, scope: ScopeValues, name: str, binding: Optional[cst.CSTNode], flag: cst.CSTNode, at: cst.CSTNode) -> bool:
        """A flag later in a loop around `at`, with `name` bound outside the
        loop and not rebound after the flag: from the second pass on, `at`
        reads the tensor the flag made a leaf that requires grad."""
        index = self.index
        if index.order[flag] <= index.order[at]:
            return False
        loop = next((a for a in index.ancestors(at) if isinstance(a, (cst.For, cst.While, cst.FunctionDef, cst.Lambda))), None)
        if not isinstance(loop, (cst.For, cst.While)) or not index.is_inside(flag, loop.body):
            return False
        if binding is not None and (binding is loop or index.is_inside(binding, loop)):
            return False  # bound anew on every pass (the loop's own target too)
        return not any(
            index.order[entry[1]] > index.order[flag] and index.is_inside(entry[1], loop.body)
            for entry in scope.assignments.get(name, ())
        )

    def call_flags(self, scope: cst.CSTNode) -> Dict[str, List[cst.CSTNode]]:
        """The statements of `scope` that call a function of the file which
        makes its argument require grad in place (`head_mask.requires_grad_()`
        on its parameter `head_mask`), by the name of the tensor passed: the
        caller's tensor is that leaf afterwards."""
        if scope not in self._call_flags:
            found: Dict[str, List[cst.CSTNode]] = {}
            for function, params in self._argument_flaggers().items():
                for param in params:
                    for site, argument in self.passed_at(param):
                        if isinstance(argument, cst.Name) and self.index.scope_of(site) is scope:
                            statement = self.index.enclosing(site, cst.SimpleStatementLine)
                            if statement is not None:
                                found.setdefault(argument.value, []).append(statement)
            self._call_flags[scope] = found
        return self._call_flags[scope]

    def flagged_by_calls(self) -> Set[str]:
        """The names of the tensors the file passes to a function that makes
        that argument require grad in place (see `call_flags`)."""
        return {
            argument.value
            for params in self._argument_flaggers().values()
            for param in params
            for _, argument in self.passed_at(param)
            if isinstance(argument, cst.Name)
        }

    def _argument_flaggers(self) -> Dict[cst.FunctionDef, List[cst.Param]]:
        """The file's functions that flag one of their parameters with
        `p.requires_grad_()` / `p.requires_grad = True`, where the flagged
        tensor may still be the argument (no rebinding that always runs first)."""
        if self._flaggers is None:
            self._flaggers = {}
            for line in self.index.nodes(cst.SimpleStatementLine):
                function = self.index.scope_of(line)
                if not isinstance(function, cst.FunctionDef):
                    continue
                for small in line.body:
                    flagged = grad_flag_set(small)
                    param = next((p for p in all_params(function.params) if p.name.value == flagged), None)
                    if param is None or param.star:
                        continue
                    rebound = [
                        e for e in self.scope(function).assignments.get(flagged, ())
                        if e[0] < self.index.order[small] and not any(
                            isinstance(a, (cst.If, cst.Else, cst.Try)) for a in self.index.ancestors(e[1]) if self.index.is_inside(a, function)
                        )
                    ]
                    if not rebound:
                        self._flaggers.setdefault(function, []).append(param)
        return self._flaggers

    def passed_at(self, param: cst.Param) -> List[Tuple[cst.Call, cst.BaseExpression]]:
        """(call, argument) for each call of the file that passes something
        for `param`: `arguments_for` with the calls kept."""
        function = self.index.enclosing(param, cst.FunctionDef)
        if function is None:
            return []
        found = []
        for call in self.call_sites(function):
            for argument in self._argument_at(call, function, param):
                found.append((call, argument))
        return found

    def _argument_at(self, call: cst.Call, function: cst.FunctionDef, param: cst.Param) -> List[cst.BaseExpression]:
        positional = list(function.params.posonly_params) + list(function.params.params)
        if positional and positional[0].name.value == self.index.instance_param(function):
            positional = positional[1:]
        position = 0
        for arg in call.args:
            if arg.star:
                return []
            if arg.keyword is None:
                if position < len(positional) and positional[position] is param:
                    return [arg.value]
                position += 1
            elif arg.keyword.value == param.name.value:
                return [arg.value]
        return []

    def binding_holds(self, name: str, node: cst.CSTNode, value: Optional[cst.BaseExpression], holds: Holds) -> Holds:
        """What `name` holds right after the assignment `node` binds it to `value`."""
        if value is None:
            if not holds and isinstance(node, cst.For):
                # `for k, y in self.outputs.items()`: what the class stores there.
                stored = [self.holds(v) for v in self.iterated_contents(node, name)]
                if stored and all(kind & Holds.ACTIVATION for kind in stored):
                    return Holds.ACTIVATION
            return holds
        if returns_indices_at(value, unpacked_position(node, name) or 0):
            return Holds.DETACHED  # `_, predicted = torch.max(outputs, 1)`: integer indices
        # `model, opt = build_model(cfg)`: what the file's function returns
        # there; else, for an unknown call, the name is the best hint.
        position = unpacked_position(node, name)
        result = (
            self.holds(value) or self.returned_object(value, position)
            or (self.method_output(value, position) if position is not None else Holds.NOTHING) or _holds_by_name(name)
        )
        if result & Holds.LOSS and _unpacked_after_first(node, name):
            # `loss, sample_size, logs = criterion(model, batch)`: only the
            # first value of a loss function's tuple is the loss.
            result &= ~Holds.LOSS
        if isinstance(node, cst.AugAssign):
            previous = self.name_holds(name, node)
            result = previous | (result & GRAD)
        if result & GRAD and self.grad_mode.is_disabled(node):
            result = (result & ~GRAD) | Holds.DETACHED
        return result

    def _evaluate(self, expr: cst.CSTNode) -> Holds:
        if isinstance(expr, cst.Name):
            return self.name_holds(expr.value, expr)
        if isinstance(expr, cst.Attribute):
            return self._attribute(expr)
        if isinstance(expr, cst.Call):
            return self._call(expr)
        if isinstance(expr, cst.BinaryOperation):
            return _grad_union(self.holds(expr.left), self.holds(expr.right))
        if isinstance(expr, cst.UnaryOperation):
            return self.holds(expr.expression) & (GRAD | Holds.DETACHED)
        if isinstance(expr, cst.Subscript):
            index = expr.slice[0].slice if len(expr.slice) == 1 else None
            if isinstance(index, cst.Index) and isinstance(index.value, cst.Integer):
                if returns_indices_at(expr.value, int(index.value.value)):
                    return Holds.DETACHED
            if isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "_parameters":
                return Holds.PARAM  # `module._parameters[name]`: nn.Module's own table of parameters
            inner = self.holds(expr.value)
            if inner & (Holds.PARAM | Holds.LEAF):
                return Holds.ACTIVATION
            return inner
        if isinstance(expr, (cst.Tuple, cst.List)):
            result = Holds.NOTHING
            for element in expr.elements:
                result |= self.holds(element.value) & GRAD
            return result
        if isinstance(expr, cst.IfExp):
            return self.holds(expr.body) | self.holds(expr.orelse)
        if isinstance(expr, (cst.Integer, cst.Float)):
            return Holds.NUMBER
        return Holds.NOTHING

    def _stored_model(self, expr: cst.Attribute) -> Holds:
        """MODEL when a `self.x = value` of the class around `self.x` stores
        a model, in any class (`self.mnetwork = self.network` after
        `self.network = Network()` in a plain wrapper object)."""
        klass = self.index.enclosing(expr, cst.ClassDef)
        if klass is None:
            return Holds.NOTHING
        stored = self._self_assignments.get(klass)
        if stored is None:
            stored = {}
            for assign in self.index.descendants(klass, cst.Assign):
                for target in assign.targets:
                    t = target.target
                    if isinstance(t, cst.Attribute) and self.index.is_receiver(t.value):
                        stored.setdefault(t.attr.value, []).append(assign.value)
            self._self_assignments[klass] = stored
        if any(self.holds(value) & Holds.MODEL for value in stored.get(expr.attr.value, ())):
            return Holds.MODEL
        return Holds.NOTHING

    def _attribute(self, expr: cst.Attribute) -> Holds:
        attr = expr.attr.value
        if attr == "data":
            if self.holds(expr.value) & Holds.PACKED:
                return Holds.NOTHING  # the packed values, with whatever graph they carry
            return Holds.DATA | Holds.DETACHED
        if attr in NO_GRAPH_ATTRIBUTES:
            return Holds.NOTHING
        if self.index.is_receiver(expr.value):
            owner = self.modules.class_of(expr)
            member = owner.members.get(attr) if owner else None
            if member is not None and member.kind == "parameter":
                # `nn.Parameter(t, requires_grad=False)`: a buffer in all but name.
                return Holds.PARAM if member.trainable else Holds.NOTHING
            if member is not None:
                return Holds.MODEL
            if self._seen_module(expr):
                return self._module_role(expr, attr)
            if self._interpreter is not None and self._interpreter().holds_optimizer(expr):
                return Holds.OPTIMIZER
            return self._stored_model(expr) or _holds_by_name(attr) or self._stored_tensor(expr)
        inner = self.holds(expr.value)
        if inner & Holds.MODEL:
            # `model.encoder`, `ddp_model.module`: a submodule; `model.generate`: not.
            return Holds.MODEL if attr == "module" or MODEL_NAME.fullmatch(attr) else Holds.NOTHING
        if inner & (Holds.ACTIVATION | Holds.LOSS):
            return Holds.LOSS | Holds.ACTIVATION if attr == "loss" else Holds.ACTIVATION
        return Holds.NOTHING

    def _call(self, call: cst.Call) -> Holds:
        func = call.func
        qualified = self.names.qualified(func)
        if qualified is not None and is_packing(qualified):
            return Holds.PACKED
        if self.index.is_receiver(func) and self.modules.class_of(call) is not None:
            return Holds.ACTIVATION  # a module's own forward, `self(x)`
        if qualified is not None:
            return self._torch_call(call, qualified)
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            if self._attribute(func) & Holds.MODEL:
                if any(self.holds(arg.value) & Holds.PACKED for arg in call.args):
                    # An RNN fed a PackedSequence returns one: `out, h = self.lstm(packed)`.
                    return Holds.PACKED | Holds.ACTIVATION
                return Holds.ACTIVATION  # a submodule's forward: `self.fc(x)`, `model.encoder(x)`
            receiver = self.holds(func.value)
            if method in DETACHING_METHODS:
                return Holds.DETACHED
            if method in TO_PYTHON_METHODS:
                return Holds.NUMBER
            if method == "parameters" and not call.args:
                return Holds.PARAM  # only modules have `.parameters()`, whatever the name
            if receiver & Holds.MODEL:
                if method in MODULE_RETURNING_SELF:
                    return Holds.MODEL
                if method == "forward":
                    return Holds.ACTIVATION
                if method in ("parameters", "named_parameters"):
                    return Holds.PARAM
                return self.method_output(call)
            if receiver & Holds.CRITERION and method == "forward":
                return Holds.LOSS | Holds.ACTIVATION
            if method == "requires_grad_":
                # The same tensor: a tensor without graph becomes a leaf
                # that requires grad (`x.detach().requires_grad_()`).
                if receiver & GRAD:
                    return receiver & GRAD
                return Holds.LEAF if asks_for_grad(call) else receiver & Holds.DETACHED
            if receiver & GRAD:
                if receiver & (Holds.PARAM | Holds.LEAF) and method not in CONVERSIONS:
                    return Holds.ACTIVATION
                kept = receiver & (Holds.LOSS | Holds.ACTIVATION)
                return kept or Holds.ACTIVATION
            if receiver & Holds.DETACHED:
                return Holds.DETACHED
            return Holds.NOTHING
        if isinstance(func, cst.Name):
            if func.value in NUMBER_BUILTINS:
                return Holds.NUMBER
            if func.value in self.modules.classes:
                return Holds.MODEL
            if _is_class_name(func.value):
                # `Model(envs)` with `Model` a class passed in: an instance, not a forward.
                return Holds.MODEL if self.holds(func) & Holds.MODEL else Holds.NOTHING
        callee = self.holds(func)
        if callee & Holds.MODEL:
            if self.frozen_model(func) and not any(self.holds(arg.value) & GRAD for arg in call.args):
                return Holds.NOTHING  # a frozen model on data: no graph
            return Holds.ACTIVATION
        if callee & Holds.CRITERION:
            return Holds.LOSS | Holds.ACTIVATION
        if isinstance(func, cst.Name) and self._submodule_alias(func):
            return Holds.ACTIVATION  # `layer = model.layer4; out = layer(x)`
        return Holds.NOTHING

    def method_output(self, call: cst.BaseExpression, position: Optional[int] = None) -> Holds:
        """ACTIVATION when `call` runs a method of a module class of this
        file on a model (`self.stable_diffusion.get_text_embeds(ids)`) every
        return of which holds activations (its submodules' outputs, with
        autograd on), at `position` of a returned tuple; a tuple asked for
        as a whole tells nothing (`action, logp = agent.get_action(x)`: the
        action is an argmax)."""
        if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
            return Holds.NOTHING
        functions = self.intent.methods_called(call)
        if len(functions) != 1 or self.modules.class_of(functions[0]) is None or not self.holds(call.func.value) & Holds.MODEL:
            return Holds.NOTHING
        function = functions[0]
        returns = [r for r in self.index.descendants(function.body, cst.Return) if self.index.scope_of(r) is function]
        if not returns:
            return Holds.NOTHING
        for returned in returns:
            value = returned.value
            if isinstance(value, cst.Tuple):
                if position is None or position >= len(value.elements):
                    return Holds.NOTHING
                value = value.elements[position].value
            elif position is not None:
                return Holds.NOTHING
            held = self.holds(value) if value is not None else Holds.NOTHING
            if not held & Holds.ACTIVATION or held & (Holds.DETACHED | Holds.MODEL):
                return Holds.NOTHING
        return Holds.ACTIVATION

    def _stored_tensor(self, expr: cst.Attribute) -> Holds:
        """ACTIVATION when every `self.x = value` of the class around `self.x`
        (tuple targets included: `self.a, self.b = self.encode(ids)`) stores
        an activation, computed in one method and read in another."""
        klass = self.index.enclosing(expr, cst.ClassDef)
        if klass is None:
            return Holds.NOTHING
        if klass not in self._tensor_stores:
            stores: Dict[str, List[cst.Assign]] = {}
            for assign in self.index.descendants(klass, cst.Assign):
                for target in assign.targets:
                    elements = target.target.elements if isinstance(target.target, (cst.Tuple, cst.List)) else [target.target]
                    for element in elements:
                        t = element.value if isinstance(element, cst.BaseElement) else element
                        if isinstance(t, cst.Attribute) and self.index.is_receiver(t.value):
                            stores.setdefault(t.attr.value, []).append(assign)
            self._tensor_stores[klass] = stores
        stored = self._tensor_stores[klass].get(expr.attr.value, [])
        if not stored:
            return Holds.NOTHING
        for assign in stored:
            position = next((
                i for target in assign.targets if isinstance(target.target, (cst.Tuple, cst.List))
                for i, element in enumerate(target.target.elements)
                if isinstance(element.value, cst.Attribute) and element.value.attr.value == expr.attr.value
            ), None)
            if position is not None and isinstance(assign.value, (cst.Tuple, cst.List)):
                held = self.holds(assign.value.elements[position].value) if position < len(assign.value.elements) else Holds.NOTHING
            elif position is not None:
                held = self.method_output(assign.value, position)
            else:
                held = self.holds(assign.value)
            if not held & Holds.ACTIVATION or held & (Holds.DETACHED | Holds.MODEL) or self.grad_mode.is_disabled(assign):
                return Holds.NOTHING
        return Holds.ACTIVATION

    def _submodule_alias(self, name: cst.Name) -> bool:
        """Whether `name`, called, holds a part of a model taken by attribute
        or index (`m = model.conv`, `block = self.blocks[i]`): called with
        tensors, it runs that submodule (or a method of the model)."""
        entry = self.scope(name).assignment_before(name.value, name)
        value = entry[2] if entry is not None else None
        if not isinstance(value, (cst.Attribute, cst.Subscript)) or unpacked_position(entry[1], name.value) is not None:
            return False
        if isinstance(value, cst.Attribute) and value.attr.value in NO_GRAPH_ATTRIBUTES | {"data", "weight", "bias"}:
            return False
        root, first = value, None
        while isinstance(root, (cst.Attribute, cst.Subscript)):
            first = root
            root = root.value
        if not isinstance(root, cst.Name) or not self.holds(root) & Holds.MODEL:
            return False
        if self.index.is_receiver(root):
            # `self.tokenizer.encode` is no submodule: only declared layers count.
            owner = self.modules.class_of(root)
            member = owner.members.get(first.attr.value) if owner is not None and isinstance(first, cst.Attribute) else None
            return member is not None and member.kind == "module"
        return True

    def _torch_call(self, call: cst.Call, qualified: str) -> Holds:
        if not qualified.startswith("torch."):
            return Holds.NOTHING
        last = qualified.rsplit(".", 1)[-1]
        if self.modules.is_loss_constructor(call):
            return Holds.CRITERION
        if self.modules.is_module_constructor(call):
            return Holds.MODEL
        if qualified.startswith("torch.optim.") and last[:1].isupper() and not qualified.startswith(("torch.optim.lr_scheduler.", "torch.optim.swa_utils.")):
            return Holds.OPTIMIZER  # not a scheduler: its `step()` changes no parameter
        if qualified == "torch.nn.Parameter":
            return Holds.PARAM
        args = _grad_union(*(self.holds(arg.value) for arg in call.args))
        if last in FACTORIES and qualified.count(".") == 1:
            for arg in call.args:
                if arg.keyword and arg.keyword.value == "requires_grad":
                    if isinstance(arg.value, cst.Name) and arg.value.value == "True":
                        return Holds.LEAF
            return Holds.NOTHING
        if _FUNCTIONAL_LOSS.fullmatch(qualified):
            return Holds.LOSS | Holds.ACTIVATION if args & GRAD else Holds.NOTHING
        if qualified.count(".") == 1 and last in NO_GRAPH_METHODS and last not in ("detach", "sample"):
            return Holds.DETACHED if args & (GRAD | Holds.DETACHED) else Holds.NOTHING  # `torch.argmax(q, 1)`: integers, no graph
        return Holds.ACTIVATION if args & GRAD else (args & Holds.DETACHED)


def _grad_union(*kinds: Holds) -> Holds:
    result = Holds.NOTHING
    for kind in kinds:
        if kind & (Holds.PARAM | Holds.LEAF):
            result |= Holds.ACTIVATION
        result |= kind & (Holds.ACTIVATION | Holds.LOSS | Holds.DETACHED)
    if result & (Holds.ACTIVATION | Holds.LOSS):
        result &= ~Holds.DETACHED
    return result


def _is_class_name(name: str) -> bool:
    """CapWords (`Model`, `QNetwork`), not a GAN's one-letter `G` or `D`."""
    return name[:1].isupper() and any(c.islower() for c in name)


def _holds_by_name(name: str) -> Holds:
    if MODEL_NAME.fullmatch(name):
        return Holds.MODEL
    if OPTIMIZER_NAME.fullmatch(name):
        return Holds.OPTIMIZER
    if CRITERION_NAME.fullmatch(name):
        return Holds.CRITERION
    return Holds.NOTHING


def _is_true_literal(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "True"
