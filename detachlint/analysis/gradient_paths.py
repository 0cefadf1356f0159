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
from detachlint.analysis.values import Holds, _all_params

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


def _cut_marker(node: cst.CSTNode) -> str:
    return f"cut:{id(node)}"


class _MethodWalker:
    def __init__(self, paths: "GradientPaths", owner: ModuleClass, method: cst.FunctionDef) -> None:
        self.paths = paths
        self.owner = owner
        self.env: Dict[str, Origins] = {}
        self.summary = MethodSummary()
        self.no_grad = 0
        self.conditional = 0
        params = list(_all_params(method.params))
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
            self.conditional += 1
            self.block(node.body)
            if node.orelse is not None:
                orelse = node.orelse
                self.statement(orelse) if isinstance(orelse, cst.If) else self.block(orelse.body)
            self.conditional -= 1
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
            for target in node.targets:
                self.bind(target.target, origins)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            self.bind(node.target, self.expr(node.value))
        elif isinstance(node, cst.AugAssign):
            origins = self.expr(node.value)
            self.bind(node.target, origins | self.expr(node.target))
        elif isinstance(node, cst.Return) and node.value is not None:
            self.summary.returns |= self.expr(node.value)
        elif isinstance(node, cst.Expr):
            value = node.value
            if isinstance(value, (cst.Yield,)) and value.value is not None:
                self.summary.returns |= self.expr(value.value)
            else:
                self.expr(value)

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
            if isinstance(node.value, cst.Name) and node.value.value == "self":
                return frozenset({node.attr.value})
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
            if method in ("detach", "detach_") and not node.args:
                marker = self._cut(node, self.expr(receiver_node))
                if method == "detach_" and isinstance(receiver_node, cst.Name) and not self.no_grad:
                    self.env[receiver_node.value] = marker
                return marker
            if isinstance(receiver_node, cst.Name) and receiver_node.value == "self":
                if method in self.owner.methods and method not in self.owner.members:
                    result = self._through_method(method, node, args)
                    return EMPTY if self.no_grad else result
                result = frozenset({method}) | arg_origins
                return EMPTY if self.no_grad else result
            receiver = self.expr(receiver_node)
            if isinstance(receiver_node, cst.Name) and args:
                # `outputs.append(z)`: the container now holds `z`.
                name = receiver_node.value
                self.env[name] = self.env.get(name, EMPTY) | arg_origins
            result = receiver | arg_origins
        else:
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
        if isinstance(arg.value, cst.Name) and arg.value.value == "self":
            return frozenset({EVERYTHING})
        return self.expr(arg.value)

    def _through_method(self, name: str, node: cst.Call, args: Sequence[Origins]) -> Origins:
        summary = self.paths.summary(self.owner, name)
        if summary is None:  # recursion
            return frozenset({EVERYTHING})
        callee = self.owner.methods[name]
        callee_params = [p.name.value for p in _all_params(callee.params)][1:]
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

        def substitute(origins: Origins) -> Origins:
            out = set()
            for origin in origins:
                if origin.startswith("arg:"):
                    out |= binding.get(origin[4:], EMPTY)
                else:
                    out.add(origin)
            return frozenset(out)

        for cut in summary.cuts:
            conditional = cut.conditional or bool(self.conditional)
            self.summary.cuts.append(Cut(cut.node, substitute(cut.origins), conditional))
        return substitute(summary.returns)


class GradientPaths:
    def __init__(self, facts: "Facts") -> None:
        self.facts = facts
        self._summaries: Dict[tuple, Optional[MethodSummary]] = {}

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
            if isinstance(func, cst.Attribute) and func.attr.value in ("detach", "detach_"):
                return True
        return any(node.attr.value == "data" for node in self.facts.index.descendants(owner.node, cst.Attribute))

    def reaches_output(self, owner: ModuleClass) -> Origins:
        """Origins that reach what any method of `owner` returns."""
        reach = set()
        for name in owner.methods:
            summary = self.summary(owner, name)
            if summary is not None:
                reach |= summary.returns
        return frozenset(reach)

    def cut_off_members(self, owner: ModuleClass, method: str = "forward") -> List[tuple]:
        """(detach call, members it leaves without gradient) for `method`.

        A member counts when its only way to the outputs runs through that
        detach: the detached value itself reaches `method`'s return (it is
        not just logged or buffered), the member reaches no method's return
        by another path, and it is trainable and not frozen on purpose.
        """
        if not self._has_detach(owner):
            return []
        summary = self.summary(owner, method)
        if summary is None:
            return []
        reach = self.reaches_output(owner)
        if EVERYTHING in reach:
            return []
        trainable = owner.trainable_members()
        found = []
        reported = set()
        for cut in summary.cuts:
            if cut.conditional or _cut_marker(cut.node) not in summary.returns:
                continue
            members = [m for m in owner.members if m in cut.origins and m in trainable]
            members = [m for m in members if m not in reach and m not in reported]
            if members:
                reported.update(members)
                found.append((cut.node, members))
        return found
