"""Which members of a module reach what its methods return, and where
`detach()` cuts them off.

For a method, every value carries the set of its *origins*: the members
(`self.encoder`, `self.weight`) whose parameters it depends on, the
method's own arguments (`arg:x`), and the `detach()` calls it passed
through (`cut:<n>`). Statements are followed in order; loops twice, branches
both ways. Calls of other methods of the class go through their summaries.
The union is generous on purpose: an unknown call depends on everything it
touches, so a member is only said to be cut off when no path at all is left.
Under `torch.no_grad()` nothing depends on anything: the user froze it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, FrozenSet, List, Optional, Sequence

import libcst as cst

from detachlint.analysis.grad_mode import Mode
from detachlint.analysis.index import children
from detachlint.analysis.modules import ModuleClass
from detachlint.analysis.names import all_params, dotted
from detachlint.analysis.values import Holds
from detachlint.analysis.vocabulary import (
    DETACHING_METHODS,
    NOT_VALUE_EDITS,
    NO_GRAPH_ATTRIBUTES,
    NO_GRAPH_METHODS,
    PARAMETER_ITERATORS,
    TO_PYTHON_METHODS,
)

if TYPE_CHECKING:  # pragma: no cover
    from detachlint.analysis import Facts

Origins = FrozenSet[str]
EMPTY: Origins = frozenset()
EVERYTHING = "*"  # `self` passed somewhere: anything may flow


def _is_grad(node: cst.CSTNode) -> bool:
    """`p.grad`: `p.grad.data` is no cut of the model's graph."""
    return isinstance(node, cst.Attribute) and node.attr.value == "grad"


@dataclass
class Cut:
    node: cst.CSTNode  # the `.detach()` call or the `.data` attribute
    origins: Origins  # what flowed into it
    # Under an `if` (`if self.config.fix_emb: x = x.detach()`): a mode the
    # author switches on, not an accident.
    conditional: bool = False


@dataclass
class MethodSummary:
    returns: Origins = EMPTY
    cuts: List[Cut] = field(default_factory=list)
    # Per element, when every `return` gives a tuple of the same length:
    # `z_q, _, _, ids = self.vq(z)` then takes only what `z_q` depends on.
    positions: Optional[List[Origins]] = None
    tuple_returns: bool = True


# Results that never carry a graph, whatever their input: integer and
# boolean tensors (`argmin`, `eq`, `long`), checked against torch 2.x where
# `w.argmin().requires_grad` is False. Not `sample`: a module of the file
# may define a differentiable one.
_INDEX_RESULTS = NO_GRAPH_METHODS - TO_PYTHON_METHODS - {"sample", "detach", "all", "any", "unique", "size", "dim"}


def _is_self(node: cst.CSTNode, index) -> bool:
    return index.is_receiver(node)


def _is_self_member(node: cst.CSTNode, index) -> bool:
    return isinstance(node, cst.Attribute) and index.is_receiver(node.value)


# Not an update of a member either: zeroing it (a reset), `apply_` (a function of each element, in `__init__`).
_NOT_EDITS = NOT_VALUE_EDITS | {"zero_", "apply_"}


def _member_under(expr: cst.CSTNode, index) -> Optional[str]:
    """`embed` for `self.embed`, `self.embed.weight.data`, `self.embed[i]`."""
    while isinstance(expr, (cst.Attribute, cst.Subscript)):
        if isinstance(expr, cst.Attribute) and index.is_receiver(expr.value):
            return expr.attr.value
        expr = expr.value
    return None


def _lists_parameters(expr: cst.CSTNode) -> bool:
    """`self.fc.parameters()`, `[{"params": ..., "lr": lr}, ...]`,
    `list(a.parameters()) + list(b.parameters())`: parameter groups."""
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in PARAMETER_ITERATORS:
            return True
        return isinstance(func, cst.Name) and func.value in ("list", "chain") and any(_lists_parameters(a.value) for a in expr.args)
    if isinstance(expr, (cst.List, cst.Tuple)):
        return bool(expr.elements) and all(_lists_parameters(e.value) for e in expr.elements)
    if isinstance(expr, cst.Dict):
        return any(_lists_parameters(e.value) for e in expr.elements if isinstance(e, cst.DictElement))
    if isinstance(expr, cst.BinaryOperation):
        return _lists_parameters(expr.left) and _lists_parameters(expr.right)
    return False


def _returns_parameter_groups(function: cst.FunctionDef, index) -> bool:
    returns = [r for r in index.descendants(function.body, cst.Return) if r.value is not None]
    return bool(returns) and all(_lists_parameters(r.value) for r in returns)


def copied_module(names, call: cst.Call) -> Optional[cst.BaseExpression]:
    """`model` in `copy.deepcopy(model)`: a copy whose parameters are new
    leaves, so what the copy computes sends no gradient to `model`."""
    if names.qualified(call.func) != "copy.deepcopy" or not call.args or call.args[0].keyword is not None:
        return None
    return call.args[0].value


def moves_gradients_by_hand(function: cst.CSTNode, index) -> bool:
    """`p.grad = q.grad`, `gp._grad = lp.grad`, `p.grad.copy_(g)`: the
    function (or script) hands gradients from one set of parameters to
    another, as first-order MAML and A3C workers do, so a loss that reaches
    only a copy still trains the original."""
    body = function.body if isinstance(function, cst.FunctionDef) else function
    for assign in index.descendants(body, cst.Assign):
        if any(isinstance(t.target, cst.Attribute) and t.target.attr.value in ("grad", "_grad") for t in assign.targets):
            return True
    for call in index.descendants(body, cst.Call):
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value in ("copy_", "add_", "set_"):
            if isinstance(func.value, cst.Attribute) and func.value.attr.value in ("grad", "_grad"):
                return True
    return False


def _cut_marker(node: cst.CSTNode) -> str:
    return f"cut:{id(node)}"


class _MethodWalker:
    def __init__(self, paths: "GradientPaths", owner: ModuleClass, method: cst.FunctionDef) -> None:
        self.paths = paths
        self.index = paths.facts.index
        self.owner = owner
        self.env: Dict[str, Origins] = {}
        self.summary = MethodSummary()
        self.no_grad = 0
        self.conditional = 0
        # Calls whose result is a tuple known element by element.
        self.positional: Dict[cst.CSTNode, List[Origins]] = {}
        params = list(all_params(method.params))
        for param in params[1:]:  # skip self
            self.env[param.name.value] = frozenset({f"arg:{param.name.value}"})
        self.params = [p.name.value for p in params[1:]]

    # Statements -------------------------------------------------------------

    def block(self, body) -> None:
        statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
        for statement in statements:
            self.statement(statement)

    def statement(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                self.small(small)
        elif isinstance(node, cst.If):
            self.expr(node.test)
            # `if self.training:` runs on every training step: no switch.
            switch = not (_is_self_member(node.test, self.index) and node.test.attr.value == "training")
            self.conditional += switch
            self.block(node.body)
            if node.orelse is not None:
                orelse = node.orelse
                self.statement(orelse) if isinstance(orelse, cst.If) else self.block(orelse.body)
            self.conditional -= switch
        elif isinstance(node, (cst.For, cst.While)):
            if isinstance(node, cst.For):
                self.bind(node.target, self.expr(node.iter))
            else:
                self.expr(node.test)
            for _ in range(2):  # values carried round the loop
                self.block(node.body)
            if node.orelse is not None:
                self.block(node.orelse.body)
        elif isinstance(node, cst.With):
            modes = [self.paths.facts.grad_mode.mode_of(item.item) for item in node.items]
            disabled = any(mode in (Mode.DISABLED, Mode.MAYBE_DISABLED) for mode in modes)
            for item in node.items:
                origins = self.expr(item.item)
                if item.asname is not None:
                    self.bind(item.asname.name, origins)
            self.no_grad += disabled
            self.block(node.body)
            self.no_grad -= disabled
        elif isinstance(node, cst.Try):
            self.block(node.body)
            for handler in node.handlers:
                self.block(handler.body)
            if node.orelse is not None:
                self.block(node.orelse.body)
            if node.finalbody is not None:
                self.block(node.finalbody.body)
        elif isinstance(node, cst.IndentedBlock):
            self.block(node)

    def small(self, node: cst.CSTNode) -> None:
        if isinstance(node, cst.Assign):
            origins = self.expr(node.value)
            positions = self.positional.get(node.value)
            for target in node.targets:
                unpacked = target.target
                if positions is not None and isinstance(unpacked, (cst.Tuple, cst.List)) and len(unpacked.elements) == len(positions):
                    for element, element_origins in zip(unpacked.elements, positions):
                        self.bind(element.value, element_origins)
                else:
                    self.bind(target.target, origins)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            self.bind(node.target, self.expr(node.value))
        elif isinstance(node, cst.AugAssign):
            origins = self.expr(node.value)
            self.bind(node.target, origins | self.expr(node.target))
        elif isinstance(node, cst.Return) and node.value is not None:
            value = node.value
            if isinstance(value, cst.Tuple) and not any(isinstance(e, cst.StarredElement) for e in value.elements):
                elements = [self.expr(element.value) for element in value.elements]
                self.summary.returns |= EMPTY.union(*elements)
                self._record_positions(elements)
            else:
                self.summary.returns |= self.expr(value)
                self.summary.tuple_returns = False
        elif isinstance(node, cst.Expr):
            value = node.value
            if isinstance(value, (cst.Yield,)) and value.value is not None:
                self.summary.returns |= self.expr(value.value)
            else:
                self.expr(value)

    def _record_positions(self, elements: List[Origins]) -> None:
        summary = self.summary
        if not summary.tuple_returns:
            return
        if summary.positions is None:
            summary.positions = list(elements)
        elif len(summary.positions) != len(elements):
            summary.tuple_returns = False
        else:
            summary.positions = [a | b for a, b in zip(summary.positions, elements)]

    def bind(self, target: cst.CSTNode, origins: Origins) -> None:
        if isinstance(target, cst.Name):
            self.env[target.value] = origins
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self.bind(element.value, origins)
        elif isinstance(target, cst.StarredElement):
            self.bind(target.value, origins)
        elif isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
            # `outputs["z"] = z` adds to `outputs`.
            name = target.value.value
            self.env[name] = self.env.get(name, EMPTY) | origins

    # Expressions ------------------------------------------------------------

    def expr(self, node: cst.CSTNode) -> Origins:
        if isinstance(node, cst.Name):
            return self.env.get(node.value, EMPTY)
        if isinstance(node, cst.Attribute):
            if node.attr.value == "data" and not _is_grad(node.value) and not self._packed(node.value):
                return self._cut(node, self.expr(node.value))
            if self.index.is_receiver(node.value):
                return frozenset({node.attr.value})
            if node.attr.value in NO_GRAPH_ATTRIBUTES:
                self.expr(node.value)
                return EMPTY  # `x.shape[0]`, `x.device`: no graph
            return self.expr(node.value)
        if isinstance(node, cst.Call):
            return self.call(node)
        if isinstance(node, cst.IfExp):
            test = self.expr(node.test)
            self.conditional += 1
            origins = test | self.expr(node.body) | self.expr(node.orelse)
            self.conditional -= 1
            return origins
        if isinstance(node, (cst.Lambda, cst.BaseString, cst.Integer, cst.Float)):
            return EMPTY
        if isinstance(node, cst.Comparison):
            for child in children(node):
                self.expr(child)
            return EMPTY  # a boolean tensor: no graph
        origins = EMPTY
        for child in children(node):
            origins |= self.expr(child)
        return origins

    def call(self, node: cst.Call) -> Origins:
        func = node.func
        args = [self._arg(arg) for arg in node.args]
        arg_origins = EMPTY.union(*args) if args else EMPTY
        if isinstance(func, cst.Attribute):
            method = func.attr.value
            receiver_node = func.value
            if method in DETACHING_METHODS and not node.args:
                marker = self._cut(node, self.expr(receiver_node))
                if method == "detach_" and isinstance(receiver_node, cst.Name) and not self.no_grad:
                    self.env[receiver_node.value] = marker
                return marker
            if method in _INDEX_RESULTS and not _is_self(receiver_node, self.index) and not _is_self_member(receiver_node, self.index):
                self.expr(receiver_node)
                return EMPTY  # `dist.argmin(-1)`: integer indices, no graph
            if self.index.is_receiver(receiver_node):
                if method in self.owner.methods and method not in self.owner.members:
                    result = self._through_method(method, node, args)
                    return EMPTY if self.no_grad else result
                inner = self._member_class(method)
                if inner is not None:
                    result = self._through_method("forward", node, args, inner, method)
                else:
                    result = frozenset({method}) | arg_origins
                return EMPTY if self.no_grad else result
            receiver = self.expr(receiver_node)
            # (`torch.cat(...)`, `F.mse_loss(...)`: an imported module holds nothing.)
            if isinstance(receiver_node, cst.Name) and args and receiver_node.value not in self.paths.facts.names.aliases:
                # `outputs.append(z)`: the container now holds `z`.
                name = receiver_node.value
                self.env[name] = self.env.get(name, EMPTY) | arg_origins
            result = receiver | arg_origins
        else:
            qualified = self.paths.facts.names.qualified(func) or ""
            if qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1] in _INDEX_RESULTS:
                return EMPTY  # `torch.argmin(dist, -1)`
            result = self.expr(func) | arg_origins
        return EMPTY if self.no_grad else result

    def _packed(self, node: cst.CSTNode) -> bool:
        return bool(self.paths.facts.values.holds(node) & Holds.PACKED)

    def _cut(self, node: cst.CSTNode, cut_from: Origins) -> Origins:
        """`x.detach()` or `x.data`: what flows on is the cut itself."""
        if self.no_grad:
            return EMPTY
        self.summary.cuts.append(Cut(node, cut_from, bool(self.conditional)))
        return frozenset({_cut_marker(node)})

    def _arg(self, arg: cst.Arg) -> Origins:
        if self.index.is_receiver(arg.value):
            return frozenset({EVERYTHING})
        return self.expr(arg.value)

    def _through_method(
        self, name: str, node: cst.Call, args: Sequence[Origins],
        owner: Optional[ModuleClass] = None, member_name: str = "",
    ) -> Origins:
        """The call's origins through the callee's summary: a method of this
        class, or (with `owner`) the `forward` of a member built from a class
        of this file, whose own members all count as that member."""
        member = owner is not None
        owner = owner or self.owner
        as_member = frozenset({member_name})
        summary = self.paths.summary(owner, name)
        if summary is None:  # recursion
            return frozenset({EVERYTHING})
        renamed = {}
        if member:
            kept = owner.trainable_members() - self.paths.updated_by_hand(owner)
            renamed = {m: (as_member if m in kept else EMPTY) for m in owner.members}
            renamed.update((b, EMPTY) for b in self.paths.buffers(owner) if b not in kept)
        callee = owner.methods[name]
        callee_params = [p.name.value for p in all_params(callee.params)][1:]
        binding: Dict[str, Origins] = {}
        position = 0
        for arg, origins in zip(node.args, args):
            if arg.keyword is not None:
                binding[arg.keyword.value] = origins
            elif arg.star:
                for param in callee_params[position:]:
                    binding[param] = binding.get(param, EMPTY) | origins
            elif position < len(callee_params):
                binding[callee_params[position]] = origins
                position += 1

        def substitute(origins: Origins, unknown: Origins = as_member) -> Origins:
            out = set()
            for origin in origins:
                if origin.startswith("arg:"):
                    out |= binding.get(origin[4:], EMPTY)
                elif not member or origin == EVERYTHING or origin.startswith("cut:"):
                    out.add(origin)
                else:  # an attribute of the member's class: the member itself
                    out |= renamed.get(origin, unknown)
            return frozenset(out)

        for cut in summary.cuts:
            conditional = cut.conditional or bool(self.conditional)
            # What a cut cuts off is said only of members known to train.
            self.summary.cuts.append(Cut(cut.node, substitute(cut.origins, EMPTY), conditional))
        # `**kwargs` on either side: where an argument goes is unknown, so
        # it may reach everything the call returns.
        spread = EMPTY
        if callee.params.star_kwarg is not None or any(arg.star == "**" for arg in node.args):
            spread = EMPTY.union(*args) if args else EMPTY
        if summary.positions is not None and summary.tuple_returns:
            self.positional[node] = [substitute(p) | spread for p in summary.positions]
        return substitute(summary.returns) | spread

    def _member_class(self, name: str) -> Optional[ModuleClass]:
        """The class of this file that built member `name`, if it has a `forward`."""
        member = self.owner.members.get(name)
        if member is None or member.kind != "module" or not isinstance(member.value, cst.Call):
            return None
        func = member.value.func
        if not isinstance(func, cst.Name):
            return None
        local = self.paths.facts.modules.module_class_named(func.value)
        if local is None or local is self.owner or "forward" not in local.methods:
            return None
        return local


class GradientPaths:
    def __init__(self, facts: "Facts") -> None:
        self.facts = facts
        self._summaries: Dict[tuple, Optional[MethodSummary]] = {}
        self._cut_off: Dict[tuple, List[tuple]] = {}
        self._plain_owners: Dict[int, ModuleClass] = {}
        self._moves_gradients: Dict[cst.CSTNode, bool] = {}
        self._called_on_others: Optional[set] = None

    def _reported_by_its_class(self, node: cst.CSTNode, owner: ModuleClass) -> bool:
        """A cut inside a member's class, which that class reports itself."""
        home = self.facts.modules.class_of(node)
        if home is None or home is owner or "forward" not in home.methods:
            return False
        return any(cut is node for cut, _ in self.cut_off_members(home, "forward"))

    def summary(self, owner: ModuleClass, method: str) -> Optional[MethodSummary]:
        """Returns and cuts of `owner.method`; None while it is being built."""
        key = (owner.name, method)
        if key in self._summaries:
            return self._summaries[key]
        function = owner.methods.get(method)
        if function is None:
            return MethodSummary(returns=frozenset({EVERYTHING}))
        self._summaries[key] = None
        walker = _MethodWalker(self, owner, function)
        walker.block(function.body)
        self._summaries[key] = walker.summary
        return walker.summary

    def _has_detach(self, owner: ModuleClass) -> bool:
        for call in self.facts.index.descendants(owner.node, cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in DETACHING_METHODS:
                return True
        return any(node.attr.value == "data" for node in self.facts.index.descendants(owner.node, cst.Attribute))

    def reaches_output(self, owner: ModuleClass, method: str = "forward") -> Origins:
        """Origins that reach what any method of `owner` returns to its
        callers. A helper that only `method` (transitively) runs, and that
        nothing else in the file calls, returns into `method` and is no
        output of its own; a method returning parameter groups
        (`[{"params": self.fc.parameters()}]`) hands them to an optimizer."""
        helpers = self._helpers_of(owner, method)
        reach = set()
        for name, function in owner.methods.items():
            if name in helpers or _returns_parameter_groups(function, self.facts.index):
                continue
            summary = self.summary(owner, name)
            if summary is not None:
                reach |= summary.returns
        return frozenset(reach)

    def _helpers_of(self, owner: ModuleClass, method: str) -> set:
        """Methods `method` calls through `self`, transitively, that no other
        method of the class and no code outside it calls."""
        index = self.facts.index
        callers: Dict[str, set] = {}
        for name, function in owner.methods.items():
            for call in index.descendants(function, cst.Call):
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value in owner.methods:
                    if _is_self(func.value, index):
                        callers.setdefault(func.attr.value, set()).add(name)
        # Called on another receiver anywhere in the file: used from outside.
        if self._called_on_others is None:
            self._called_on_others = {
                call.func.attr.value for call in index.nodes(cst.Call)
                if isinstance(call.func, cst.Attribute) and not _is_self(call.func.value, index)
            }
        outside = self._called_on_others & set(owner.methods)
        helpers: set = set()
        frontier = [method]
        while frontier:
            current = frontier.pop()
            for name, by in callers.items():
                if name in helpers or name == method or current not in by:
                    continue
                if by <= helpers | {method} and name not in outside:
                    helpers.add(name)
                    frontier.append(name)
        return helpers

    def function_summary(self, function: cst.FunctionDef) -> Optional[MethodSummary]:
        """The summary of any function of the file: a method of an
        `nn.Module` through its class, or a method of another class or a
        plain function, whose `self.x` are then plain attributes."""
        index = self.facts.index
        klass = index.parent(index.parent(function))
        owner = self.facts.modules.class_of(function) if isinstance(klass, cst.ClassDef) else None
        if owner is None or owner.node is not klass:
            methods = {}
            if isinstance(klass, cst.ClassDef):
                methods = {f.name.value: f for f in klass.body.body if isinstance(f, cst.FunctionDef)}
            owner = self._plain_owners.setdefault(
                id(function), ModuleClass(f"<{id(klass) if methods else id(function)}>", function, methods=methods)
            )
            if not methods:
                owner.methods[function.name.value] = function
        return self.summary(owner, function.name.value)

    def cut_parameters(self, function: cst.FunctionDef) -> Dict[str, cst.CSTNode]:
        """Parameters whose graph `function` always cuts before returning:
        `logits = outputs.clone().detach()` then `return log_softmax(logits)`.
        Each maps to the `.detach()` (or `.data`) that cuts it; only when
        the cut value is returned and the parameter reaches the return by no
        other way."""
        summary = self.function_summary(function)
        if summary is None or EVERYTHING in summary.returns:
            return {}
        found: Dict[str, cst.CSTNode] = {}
        for cut in summary.cuts:
            if cut.conditional or _cut_marker(cut.node) not in summary.returns:
                continue
            for origin in cut.origins:
                if origin.startswith("arg:") and origin not in summary.returns:
                    found.setdefault(origin[4:], cut.node)
        return found

    def moves_gradients_by_hand(self, function: cst.FunctionDef) -> bool:
        """Cached `moves_gradients_by_hand` of `function`."""
        if function not in self._moves_gradients:
            self._moves_gradients[function] = moves_gradients_by_hand(function, self.facts.index)
        return self._moves_gradients[function]

    def buffers(self, owner: ModuleClass) -> set:
        """Names the class registers as buffers (`self.register_buffer("embed",
        t)`): tensors that autograd never trains."""
        found = set()
        for call in self.facts.index.descendants(owner.node, cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "register_buffer" and _is_self(func.value, self.facts.index):
                if call.args and isinstance(call.args[0].value, cst.SimpleString):
                    found.add(call.args[0].value.evaluated_value)
        return found

    def updated_by_hand(self, owner: ModuleClass) -> set:
        """Members whose weights the class writes itself (`self.embed.weight
        .data.copy_(...)`, `self.codebook.mul_(decay)`, an EMA or k-means
        update): not trained by gradients alone."""
        found = set()
        index = self.facts.index

        def initialising(node: cst.CSTNode) -> bool:
            # `self.embed.weight.data.uniform_(-1 / n, 1 / n)` in `__init__`
            # or `reset_parameters`: a starting point, not an update.
            function = index.enclosing(node, cst.FunctionDef)
            return function is None or "init" in function.name.value or "reset" in function.name.value

        for call in index.descendants(owner.node, cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value.endswith("_") and func.attr.value not in _NOT_EDITS:
                member = _member_under(func.value, index)
                if member is not None and not initialising(call):
                    found.add(member)
        for assign in index.descendants(owner.node, cst.Assign):
            if initialising(assign):
                continue
            for target in assign.targets:
                member = _member_under(target.target, index)
                if member is not None and not _is_self_member(target.target, index):
                    found.add(member)
        return found

    def cut_off_members(self, owner: ModuleClass, method: str = "forward") -> List[tuple]:
        """(detach call, members it leaves without gradient) for `method`.

        A member counts when its only way to the outputs runs through that
        detach: the detached value itself reaches `method`'s return (it is
        not just logged or buffered), the member reaches no method's return
        by another path, and it is trainable, not frozen on purpose and not
        updated by the class itself.
        """
        key = (owner.name, method)
        if key not in self._cut_off:
            self._cut_off[key] = []  # guards recursion
            self._cut_off[key] = self._find_cut_off(owner, method)
        return self._cut_off[key]

    def _find_cut_off(self, owner: ModuleClass, method: str) -> List[tuple]:
        local = [self.facts.modules.module_class_named(dotted(m.value.func) or "") for m in owner.members.values() if isinstance(m.value, cst.Call)]
        if not self._has_detach(owner) and not any(c is not None and c is not owner and self._has_detach(c) for c in local):
            return []
        summary = self.summary(owner, method)
        if summary is None:
            return []
        reach = self.reaches_output(owner, method)
        if EVERYTHING in reach:
            return []
        trainable = self.facts.optimizers.meant_to_train(owner) - self.updated_by_hand(owner)
        found = []
        reported = set()
        for cut in summary.cuts:
            if cut.conditional or _cut_marker(cut.node) not in summary.returns:
                continue
            if self._reported_by_its_class(cut.node, owner):
                continue
            members = [m for m in owner.members if m in cut.origins and m in trainable]
            members = [m for m in members if m not in reach and m not in reported]
            if members:
                reported.update(members)
                found.append((cut.node, members))
        return found
