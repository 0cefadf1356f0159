"""Which members' outputs a value carries with its graph, and where a cut
stops the others.

`module_origins(facts, expr, ...)` answers, for an expression, the `self.m`
modules whose output it is computed from with its graph: through names (the
assignments that reach them), helpers of the file (their returns, with the
parameters bound to the call's arguments, and through `OUTER` to the
caller's own), tuples returned by position, dict outputs by key
(`outputs["weights"]`), the blocks of a member `nn.ModuleList`, and the
`forward` of an instance handed in as an argument. Modules met behind a cut
go into `cuts` with the node that cut them: a binding under `no_grad`, a
`.detach()` inline or bound, `map(torch.detach, xs)`, `torch.tensor(xs)`
(a copy of the values without their graph), a `copy.deepcopy` of the
module, or a function of the file that always cuts the argument it is
handed. What cannot be followed (a callable handed in, a parameter that may
carry its caller's graph) shows as `UNKNOWN`, so that "no graph left" is
only said when it is known.
"""

from __future__ import annotations

from typing import Optional

import libcst as cst

from detachlint.analysis.gradient_paths import copied_module
from detachlint.analysis.loss_terms import OUTER, LossTerms, arguments_of
from detachlint.analysis.priors import DATA_NAME
from detachlint.analysis.names import dotted, string_key, unpacked_position
from detachlint.analysis.values import Holds
from detachlint.analysis.vocabulary import COPYING_CONSTRUCTORS

UNKNOWN = "?"  # an origin `module_origins` cannot follow: the value may carry any graph


def module_origins(
    facts, expr: cst.BaseExpression, depth: int, cuts: Optional[dict] = None, ignore_grad_mode: bool = False,
    bound: Optional[dict] = None,
) -> set:
    """The `self.m` modules whose output `expr` is computed from, with its
    graph: `self.encoder(x)`, names bound to it, helpers returning it.
    Modules met behind a cut (a binding under `no_grad`, a `.detach()`, a
    `copy.deepcopy` of the module) go into `cuts`, each with the node that
    cut it. `bound`: a helper's parameters, to the caller's arguments.

    Results are kept per expression (and per binding of a helper's
    parameters), with the cuts met, so a value read by many later
    expressions is followed once: without that, a long update method
    follows the same bindings thousands of times. A kept result is reused
    only where it was computed with at least as much depth left."""
    if depth > 12:
        return set()
    memo = facts.shared("module_origins", lambda _: {})
    key = (expr, ignore_grad_mode, cuts is None, _bound_key(bound) if bound else None)
    kept = memo.get(key)
    if kept is None or kept[0] > depth:
        log = None if cuts is None else CutLog()
        found = _origins(facts, expr, depth, log, ignore_grad_mode, bound or None)
        kept = memo[key] = (depth, frozenset(found), log.every if log is not None else ())
    if cuts is not None:
        for module, node in kept[2]:
            cuts.setdefault(module, node)
    return set(kept[1])


def _origins(facts, expr: cst.BaseExpression, depth: int, cuts, ignore_grad_mode: bool, bound: Optional[dict]) -> set:
    found = set()
    if isinstance(expr, cst.Name):
        nodes = [expr]
    else:
        nodes = [
            expr, *facts.index.descendants(expr, cst.Subscript), *facts.index.descendants(expr, cst.Call),
            *facts.index.descendants(expr, cst.Name),
            *(a for a in facts.index.descendants(expr, cst.Attribute) if a.attr.value == "data"),
        ]
    # Arguments a function of the file cuts before returning
    # (`env.get_logprobs(self.policy(x), ...)` detaching its first parameter).
    cut_args = []
    terms = facts.shared("loss_terms", LossTerms)
    for node in nodes:
        # `outputs["weight"]` of a dict the file builds: that entry only.
        if isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and string_key(node) is not None:
            entries = terms.dict_entries(node.value, string_key(node), bound or {})
            if entries:
                cut_args.append(node)
                for value, entry_bound in entries:
                    found |= module_origins(facts, value, depth + 1, cuts, ignore_grad_mode, entry_bound)
    for node in nodes:
        if isinstance(node, cst.Call):
            copied = copied_module(facts.names, node)
            if copied is not None:
                # A deep copy's parameters are new leaves: its outputs train the copy.
                cut_args.append(copied)
                if isinstance(copied, cst.Name) and bound and copied.value in bound:
                    copied = _resolve(bound, copied.value)[0]
                name = dotted(copied)
                if cuts is not None and name and name.startswith(_member_prefix(facts, copied)) and name.count(".") == 1:
                    cuts.setdefault(name, node)
            for arg, cut_node in cut_arguments(facts, node):
                cut_args.append(arg)
                if cuts is not None:
                    for module in module_origins(facts, arg, depth + 1, None, ignore_grad_mode):
                        cuts.setdefault(module, cut_node)
        cut_from = detached_value(facts, node)
        if cut_from is not None:
            # `self.encoder(xp.detach())`: what `xp` carries stops here.
            cut_args.append(cut_from)
            if cuts is not None:
                for module in module_origins(facts, cut_from, depth + 1, None, ignore_grad_mode, bound):
                    if module != UNKNOWN:
                        cuts.setdefault(module, node)
    for node in nodes:
        if any(node is arg or facts.index.is_inside(node, arg) for arg in cut_args):
            continue
        if isinstance(node, cst.Call):
            if facts.grad_mode.is_disabled(node) and not ignore_grad_mode:
                continue
            name = dotted(node.func)
            passed = _passed_forward(facts, node)
            if passed is not None:
                # `speaker_encoder(wav_hat)` with an instance of a class of the file handed in:
                # its arguments are followed through its `forward`.
                found |= _through_instance(facts, node, passed, depth, cuts, ignore_grad_mode, bound)
                cut_args.extend(arg.value for arg in node.args)
                continue
            if isinstance(node.func, cst.Name) and bound and node.func.value in bound:
                # `model(x)` in a helper handed `self.model`.
                handed = _resolve(bound, node.func.value)[0]
                name = dotted(handed) or ""
                if isinstance(handed, cst.Name) and (_names_a_model(facts, handed) or _handed_a_model(facts, handed)):
                    found.add(handed.value)  # `netD(x)` in a helper handed `discriminator = Net()`, or a model its caller was handed
                    continue
                if not (name.startswith(_member_prefix(facts, handed)) and name.count(".") == 1):
                    found.add(UNKNOWN)
                    continue
            elif isinstance(node.func, cst.Name) and node.func.value in facts.values.scope(node).params:
                # A callable handed in: the module the parameter holds where every
                # caller of the file hands it one; else not known here.
                found.add(node.func.value if _handed_a_model(facts, node.func) else UNKNOWN)
                continue
            elif isinstance(node.func, cst.Name) and _names_a_model(facts, node.func):
                # `encoder(x)` with `encoder = nn.Linear(...)`, `fast = copy.deepcopy(model)`:
                # the module the name holds, a graph of its own.
                found.add(node.func.value)
                continue
            if name and name.startswith(_member_prefix(facts, node)) and name.count(".") > 1:
                # `self.encoder.layer(x)`: a part of a member; of a plain object, unknown.
                found.add(name.split(".")[0] + "." + name.split(".")[1] if _is_member(facts, node) else UNKNOWN)
                continue
            on_instance = bool(name) and name.startswith(_member_prefix(facts, node)) and name.count(".") == 1
            if on_instance or isinstance(node.func, cst.Name):
                # `self.step(x)` or `penalty(D, x)`: what the file's function returns,
                # its parameters bound to what this call passes.
                helpers = facts.intent.helpers_called(node)
                if not helpers and on_instance:
                    found.add(name)
                for helper in helpers:
                    arguments = arguments_of(helper, node, bound, facts.index)
                    for returned in facts.index.descendants(helper.body, cst.Return):
                        if returned.value is not None:
                            found |= module_origins(facts, returned.value, depth + 1, cuts, ignore_grad_mode, arguments)
        elif isinstance(node, cst.Name) and not facts.index.is_receiver(node):
            reaching = facts.values.scope(node).reaching(node)
            if not reaching and bound and node.value in bound:
                value, outer = _resolve(bound, node.value)
                found |= module_origins(facts, value, depth + 1, cuts, ignore_grad_mode, outer)
            elif not reaching and _opaque_parameter(facts, node, depth):
                found.add(UNKNOWN)
            elif not reaching:
                # `[t[1] for t in self.memory]`: what the class stores in the container.
                for stored in _comprehension_contents(facts, node):
                    found |= module_origins(facts, stored, depth + 1, cuts, ignore_grad_mode)
            for binding, value in reaching:
                if value is None:
                    continue
                if facts.grad_mode.is_disabled(binding) and not ignore_grad_mode:
                    if cuts is not None:
                        cut_by = facts.grad_mode.disabled_by(binding) or binding
                        for module in module_origins(facts, value, depth + 1, None, True, bound):
                            cuts.setdefault(module, cut_by)
                    continue
                detached = detached_value(facts, value)
                if detached is not None:
                    if cuts is not None:
                        for module in module_origins(facts, detached, depth + 1, bound=bound):
                            if module != UNKNOWN:
                                cuts.setdefault(module, value)
                    continue
                position = unpacked_position(binding, node.value)
                returned = _returned_at(facts, value, position, bound) if position is not None else None
                if returned is not None:
                    # `deformed, weights = deform(cage, x)`: what the helper returns there.
                    for element, callee_bound in returned:
                        found |= module_origins(facts, element, depth + 1, cuts, bound=callee_bound)
                    continue
                found |= module_origins(facts, value, depth + 1, cuts, bound=bound)
    return found


def _passed_forward(facts, call: cst.Call) -> Optional[cst.FunctionDef]:
    """The `forward` of the module class of the file whose instance the
    parameter `call` calls always receives."""
    if not (isinstance(call.func, cst.Name) and call.func.value in facts.values.scope(call).params):
        return None
    klass = facts.shared("loss_terms", LossTerms).passed_class(call.func)
    owner = facts.modules.class_of(klass.body) if klass is not None else None
    return owner.methods.get("forward") if owner is not None and owner.node is klass else None


def _through_instance(facts, call: cst.Call, forward: cst.FunctionDef, depth: int, cuts, ignore_grad_mode, bound) -> set:
    """Origins of `call` through the `forward` it runs: the instance's own
    members count as the instance (`speaker_encoder`), or as nothing when
    the file freezes it (`speaker_encoder.requires_grad_(False)`); cuts
    `forward` makes of its arguments are kept."""
    label = call.func.value  # type: ignore[attr-defined]
    frozen = label in facts.modules.frozen_names or label in facts.shared("loss_terms", LossTerms).frozen_objects()
    inner_cuts = CutLog()
    arguments = arguments_of(forward, call, bound, facts.index)
    inner = set()
    for returned in facts.index.descendants(forward.body, cst.Return):
        if returned.value is not None and facts.index.scope_of(returned) is forward:
            inner |= module_origins(facts, returned.value, depth + 1, inner_cuts, ignore_grad_mode, arguments)
    own = _member_prefix(facts, forward)
    if cuts is not None:
        for module, node in inner_cuts.every:
            if not module.startswith(own):
                cuts.setdefault(module, node)
            elif not frozen:
                cuts.setdefault(label, node)
    return {o for o in inner if not o.startswith(own)} | ({label} if any(o.startswith(own) for o in inner) and not frozen else set())


def _returned_at(facts, call: cst.BaseExpression, position: int, bound: Optional[dict]):
    """(element, parameters bound) at `position` of every tuple the one
    function of the file `call` runs returns; None when any return is no
    such tuple."""
    if not isinstance(call, cst.Call):
        return None
    functions = facts.shared("loss_terms", LossTerms).functions_run(call)
    if len(functions) != 1:
        return None
    function = functions[0]
    found = []
    callee_bound = arguments_of(function, call, bound, facts.index)
    for returned in facts.index.descendants(function.body, cst.Return):
        if facts.index.scope_of(returned) is not function:
            continue
        value = returned.value
        if not isinstance(value, cst.Tuple) or position >= len(value.elements) or any(e.value is None for e in value.elements):
            return None
        found.append((value.elements[position].value, callee_bound))
    return found or None


def _bound_key(bound: dict) -> tuple:
    """A helper's parameter bindings as a key: each argument node by identity."""
    return tuple(sorted(
        (name, _bound_key(value) if name == OUTER and value else id(value)) for name, value in bound.items()
    ))


def inline_cut(node: cst.CSTNode) -> Optional[cst.BaseExpression]:
    """`x` for `x.detach()`: a cut inside an expression."""
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == "detach" and not node.args:
        return node.func.value
    return None


class CutLog(dict):
    """`cuts` for `module_origins` that also keeps every cut of a module,
    not only the first: (module, cut node) in the order met."""

    def __init__(self) -> None:
        super().__init__()
        self.every: list = []

    def setdefault(self, key, default=None):
        self.every.append((key, default))
        return super().setdefault(key, default)


def _comprehension_contents(facts, name: cst.Name) -> list:
    """What `t` takes in `[t[1] for t in self.memory]`: the values the class
    stores in `self.memory` (`self.memory.append((value, log_prob, r))`)."""
    for ancestor in facts.index.ancestors(name):
        if isinstance(ancestor, (cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp)):
            comp = ancestor.for_in
            while comp is not None:
                if isinstance(comp.target, cst.Name) and comp.target.value == name.value:
                    return facts.values.stored_in(comp.iter) if isinstance(comp.iter, cst.Attribute) else []
                comp = comp.inner_for_in
        if isinstance(ancestor, (cst.BaseStatement, cst.BaseSmallStatement)):
            break
    return []


def detached_value(facts, value: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """`x` for `x.detach()` and `x.data` (not `p.grad.data`, nor the `.data`
    of a packed sequence, which keeps its graph); `xs` for
    `map(torch.detach, xs)`, which detaches each; `xs` for `torch.tensor(xs)`,
    a copy of the values with no graph."""
    if isinstance(value, cst.Attribute) and value.attr.value == "data":
        inner = value.value
        if isinstance(inner, cst.Attribute) and inner.attr.value in ("grad", "_grad"):
            return None
        return None if facts.values.holds(inner) & Holds.PACKED else inner
    if not isinstance(value, cst.Call):
        return None
    inner = inline_cut(value)
    if inner is not None:
        return inner
    if facts.names.qualified(value.func) in COPYING_CONSTRUCTORS and value.args and value.args[0].keyword is None:
        if not any(arg.keyword is not None and arg.keyword.value == "requires_grad" for arg in value.args):
            return value.args[0].value
    if isinstance(value.func, cst.Name) and value.func.value == "map" and len(value.args) == 2:
        if facts.names.qualified(value.args[0].value) in ("torch.detach", "torch.Tensor.detach"):
            return value.args[1].value
    return None


def _names_a_model(facts, name: cst.Name) -> bool:
    """`name` is bound to a module built or copied here: `copy.deepcopy(m)`,
    `Net()` or `nn.Linear(...)`."""
    for _, value in facts.values.scope(name).reaching(name):
        if isinstance(value, cst.Call) and (
            copied_module(facts.names, value) is not None
            or facts.modules.is_module_constructor(value)
            or (isinstance(value.func, cst.Name) and value.func.value in facts.modules.classes)
        ):
            return True
    return False


def _handed_a_model(facts, name: cst.Name) -> bool:
    """Every call of the file passes a module for the parameter `name`:
    one it builds (`enc = nn.Linear(...)`, `Net()`) or a member of a module class."""
    function = facts.index.scope_of(name)
    if not isinstance(function, cst.FunctionDef) or facts.values.scope(name).reaching(name):
        return False
    param = next((p for p in function.params.params if p.name.value == name.value), None)
    arguments = facts.values.arguments_for(param) if param is not None else []
    return bool(arguments) and all(
        (isinstance(a, cst.Name) and _names_a_model(facts, a))
        or (isinstance(a, cst.Call) and facts.modules.is_module_constructor(a))
        or bool(facts.values.holds(a) & Holds.MODEL)
        for a in arguments
    )


def _is_member(facts, call: cst.Call) -> bool:
    """`self.encoder.layer(x)` with `encoder` a module member of the class."""
    owner = facts.modules.class_of(call)
    first = call.func
    while isinstance(first, cst.Attribute) and isinstance(first.value, cst.Attribute):
        first = first.value
    member = owner.members.get(first.attr.value) if owner is not None and isinstance(first, cst.Attribute) else None
    return member is not None and member.kind == "module"


def _member_prefix(facts, at: cst.CSTNode) -> str:
    """`self.` for the method around `at` (whatever it calls its instance):
    the start of the names of the instance's own members. Outside methods, a
    prefix no name has."""
    receiver = facts.index.receiver(at)
    return receiver + "." if receiver else "\0"


def _opaque_parameter(facts, name: cst.Name, depth: int) -> bool:
    """A parameter of the function `name` is read in that may carry a graph
    the caller made: not one named like data (`x`, `target`, `batch`), nor
    one every call of the file passes plain values for (`torch.randn(...)`)."""
    scope = facts.values.scope(name)
    if name.value not in scope.params or facts.index.is_receiver(name) or DATA_NAME.fullmatch(name.value):
        return False
    function = facts.index.scope_of(name)
    param = next((p for p in function.params.params if p.name.value == name.value), None) if isinstance(function, cst.FunctionDef) else None
    if param is None:
        return True
    known = facts.shared("module_origins.opaque_parameters", lambda _: {})
    if param not in known:
        known[param] = True  # while the callers are followed (recursion): unknown
        arguments = facts.values.arguments_for(param)
        known[param] = not arguments or any(module_origins(facts, argument, depth + 1) for argument in arguments)
    return known[param]


def _resolve(bound: dict, name: str):
    """(the caller's expression for parameter `name`, the caller's own `bound`)."""
    return bound[name], bound.get(OUTER)


def cut_arguments(facts, call: cst.Call):
    """(argument, the cut) for each argument of `call` bound to a parameter
    that the one function of the file it runs always cuts."""
    functions = facts.intent.helpers_called(call) or facts.intent.methods_called(call)
    if len(functions) != 1:
        return []
    function = functions[0]
    cut = facts.gradient_paths.cut_parameters(function)
    if not cut:
        return []
    params = [p.name.value for p in function.params.params]
    if params and params[0] == facts.index.instance_param(function) and isinstance(call.func, cst.Attribute):
        params = params[1:]
    found = []
    for position, arg in enumerate(call.args):
        if arg.star:
            return []
        name = arg.keyword.value if arg.keyword is not None else (params[position] if position < len(params) else None)
        if name in cut:
            found.append((arg.value, cut[name]))
    return found
