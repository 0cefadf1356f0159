"""The probe of DL101 (`.data` edited in place).

The edit is run three ways: as written, through `.detach()` (autograd's
version check sees that one) and made visible to autograd on a copy. A
detached edit that trips the version check overwrote a saved tensor;
gradients that differ from the visible edit's show backward used the
edited values.
"""

import ast
import math
import re
import types

import torch
from torch import nn

from detachlint.verify.runtime.standins import Inconclusive, tensors_in
from detachlint.verify.runtime.observe import copy_statement, describe_error, notes, weighted_sum
from detachlint.verify.runtime.user_code import attempt, find_working


def _modules_of(run):
    """(prefix, module): those the reproduction built, then those in scope
    where the edit ran (`self.policy`, a `policy` the file's own call built)."""
    yield from run.synth.modules.items()
    for key, value in list(getattr(run, "dl101_scope", {}).items()):
        if isinstance(value, nn.Module):
            yield key, value
        elif hasattr(value, "__dict__") and not isinstance(value, (type, torch.Tensor, types.ModuleType, types.FunctionType)):
            for attribute, inner in list(vars(value).items()):
                if isinstance(inner, nn.Module):
                    yield f"{key}.{attribute}", inner


def _in_scope(scope):
    """An observer after the edit that keeps the names in scope there (the
    modules the code trains may live only there: `self.policy`, locals of
    the file's own script), and the helper it calls."""

    def keep(statement):
        return [ast.parse("__dl101_scope__(locals())").body[0]]

    return keep, {"__dl101_scope__": lambda names: (scope.clear(), scope.update(names))}


def _with_scope(run, scope):
    """The run with the names in scope at its edit, read once: right after
    it ran (a later attempt refills `scope`)."""
    if run is not None and not hasattr(run, "dl101_scope"):
        run.dl101_scope = dict(scope)
    return run


def named_parameters(run):
    seen = set()
    for prefix, module in _modules_of(run):
        if not isinstance(module, nn.Module):
            continue
        for name, parameter in module.named_parameters():
            if id(parameter) in seen:
                continue
            seen.add(id(parameter))
            yield (f"{prefix}.{name}" if prefix else name), parameter


def _number(value):
    if value == 0:
        return "0"
    return f"{value:.2g}"


def _edited_name(spec):
    match = re.search(r"changes `([A-Za-z_][A-Za-z0-9_]*)`", spec["message"])
    return match.group(1) if match else None


def _rooted(node, name):
    """Whether `node` is `name` or a subscript of it (`out[0]`, `x[i, j][k]`)."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return isinstance(node, ast.Name) and node.id == name


def _is_data_of(node, name):
    """`name.data`, or `.data` of a subscript of `name` (`out[0].data`)."""
    return isinstance(node, ast.Attribute) and node.attr == "data" and _rooted(node.value, name)


def _write_position(statement, name):
    """The `.data` node of `name` the statement edits in place; None when the
    edit is not one of the forms the probe rewrites exactly."""
    if isinstance(statement, ast.AugAssign):
        target = statement.target
        if isinstance(target, ast.Subscript) and _is_data_of(target.value, name):
            return target.value
        return target if _is_data_of(target, name) else None
    if isinstance(statement, ast.Assign):
        for target in statement.targets:
            if isinstance(target, ast.Subscript) and _is_data_of(target.value, name):
                return target.value
    for node in ast.walk(statement):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_"):
            # The receiver of the in-place call, through chained calls and subscripts
            # (`x.data.clamp_(0).mul_(2)`, `x.data[0].zero_()`).
            receiver = node.func.value
            while isinstance(receiver, ast.Subscript) or (isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute)):
                receiver = receiver.value if isinstance(receiver, ast.Subscript) else receiver.func.value
            if _is_data_of(receiver, name):
                return receiver
    return None


def _renamed(node, name, to):
    """A copy of `node` with the name at its root renamed."""

    class _Rename(ast.NodeTransformer):
        def visit_Name(self, inner):
            return ast.Name(to, inner.ctx) if inner.id == name else inner

    return _Rename().visit(copy_statement(ast.Expr(node)).value)


class _Replace(ast.NodeTransformer):
    """Each `.data` of `name` (or of a subscript of it): the written one by
    `write_with(inner)`, the others by `read_with(inner)`, where `inner` is
    the expression before `.data`, subscripts kept."""

    def __init__(self, name, write, write_with, read_with):
        self.name, self.write, self.write_with, self.read_with = name, write, write_with, read_with

    def visit_Attribute(self, node):
        if _is_data_of(node, self.name):
            inner = self.generic_visit(node).value
            return self.write_with(inner) if node is self.write else self.read_with(inner)
        return self.generic_visit(node)


def _detached(inner):
    return ast.Call(ast.Attribute(inner, "detach", ast.Load()), [], [])


def _stored(inner):
    """`inner` as an assignment target (`out[0]`, `x`)."""
    inner = copy_statement(ast.Expr(inner)).value
    if isinstance(inner, (ast.Subscript, ast.Name)):
        inner.ctx = ast.Store()
    return inner


def _detach_rewrite(name, missed):
    """The same edit through `.detach()` (subscripts kept): autograd's version
    check sees it. `missed` collects statements it could not rewrite exactly."""

    def rewrite(statement):
        statement = copy_statement(statement)
        write = _write_position(statement, name)
        if write is None:
            missed.append(statement.lineno)
            return [statement]
        if isinstance(statement, ast.AugAssign) and statement.target is write:
            first = ast.Assign([ast.Name("__dl_alias", ast.Store())], _detached(_Replace(name, None, _detached, _detached).visit(write.value)), lineno=statement.lineno)
            statement.target = ast.Name("__dl_alias", ast.Store())
            statement = _Replace(name, None, _detached, _detached).visit(statement)
            return [ast.fix_missing_locations(first), statement]
        return [_Replace(name, write, _detached, _detached).visit(statement)]

    return rewrite


def _visible_rewrite(name, missed):
    """The edit made visible to autograd on a copy: `x = x.clone()` then the
    edit on `x` itself (`x[0].zero_()` for `x[0].data.zero_()`), so backward
    differentiates it and no saved tensor changes."""

    def rewrite(statement):
        statement = copy_statement(statement)
        write = _write_position(statement, name)
        if write is None:
            missed.append(statement.lineno)
            return [statement]
        before = ast.parse(f"__dl_old = {name}\n{name} = {name}.clone()").body
        plain = lambda inner: inner  # noqa: E731
        old = lambda inner: _renamed(inner, name, "__dl_old")  # noqa: E731
        if isinstance(statement, ast.AugAssign) and statement.target is write:
            target = _stored(write.value)
            statement.target = target
            statement = _Replace(name, None, plain, old).visit(statement)
            return before + [statement]
        return before + [_Replace(name, write, plain, old).visit(statement)]

    return rewrite


def _gradients(run):
    """name -> gradient after the run (backward from the outputs when the code did not call it)."""
    params = list(named_parameters(run))
    # No parameter known: a backward here would only repeat the code's own.
    if params and not any(p.grad is not None for _, p in params) and run.finished:
        loss = weighted_sum(tensors_in(run.result))
        if loss is not None:
            loss.backward()
    return {n: p.grad.detach().clone() for n, p in params if p.grad is not None}


def _run_plan(spec, plan, rewrite):
    """One run under a known plan; (gradients, error)."""
    scope = {}
    keep, helpers = _in_scope(scope)
    run = _with_scope(attempt(spec, plan, rewrite=rewrite, after=keep, helpers=helpers), scope)
    error = run.error
    grads = {}
    if error is None and run.synth is not None:
        try:
            grads = _gradients(run)
        except Exception as backward_error:  # noqa: BLE001
            error = backward_error
    return grads, error, run


def _data_alias(spec):
    """`(alias, source)` when the edit goes through a name bound to `source.data`."""
    match = re.search(r"\(`([A-Za-z_][A-Za-z0-9_]*)` is `([A-Za-z_][A-Za-z0-9_]*)\.data`\)", spec["message"])
    return match.groups() if match else None


def _alias_rewrites(alias, name):
    """The edit through `alias = name.data`, once through `.detach()` (the same
    storage, seen by the version check) and once visible to autograd on a copy."""

    def detached(statement):
        return ast.parse(f"{alias} = {name}.detach()").body + [copy_statement(statement)]

    def visible(statement):
        return ast.parse(f"{name} = {name}.clone()\n{alias} = {name}").body + [copy_statement(statement)]

    return detached, visible


def probe(spec, budget):
    """The edit as written, through `.detach()`, and visible on a copy: the
    detached edit trips the version check when it overwrote a saved tensor,
    and the gradients differ from the visible edit's when backward used the
    edited values."""
    name = _edited_name(spec)
    if name is None:
        raise Inconclusive("the finding names no edited tensor")
    alias = _data_alias(spec)
    missed = []
    if alias is not None:
        detach_rewrite, visible_rewrite = _alias_rewrites(*alias)
    else:
        detach_rewrite, visible_rewrite = _detach_rewrite(name, missed), _visible_rewrite(name, missed)
    scope = {}
    keep, helpers = _in_scope(scope)
    def comparable(run):
        # Gradients to compare: the code's own backward filled some, or what
        # it returned can be backpropagated (a script that stops at the forward cannot).
        params = [p for _, p in named_parameters(_with_scope(run, scope))]
        return any(p.grad is not None for p in params) or weighted_sum(tensors_in(run.result)) is not None

    run = _with_scope(find_working(spec, after=keep, helpers=helpers, budget=budget, accept=comparable), scope)
    plan = run.plan
    original = {}
    if run.error is None:
        try:
            original = _gradients(run)
        except Exception as error:  # noqa: BLE001
            run.error = error
    _, detach_error, _ = _run_plan(spec, plan, detach_rewrite)
    visible, visible_error, _ = _run_plan(spec, plan, visible_rewrite)
    if missed:
        # Comparing a different edit would answer another question.
        raise Inconclusive(f"the edit on line {missed[0]} is not a form the probe can redo exactly through `.detach()` and on a copy" + notes(run))
    tripped = detach_error is not None and "modified by an inplace operation" in str(detach_error)
    parts = []
    if tripped:
        saved_by = re.search(r"output \d+ of (\w+)", str(detach_error))
        by = f" ({saved_by.group(1)} saved `{name}` for backward)" if saved_by else ""
        parts.append(
            f"the same edit through `.detach()` makes backward raise \"one of the variables needed for gradient "
            f"computation has been modified by an inplace operation\"{by}"
        )
    difference, where = 0.0, None
    if original and visible and visible_error is None:
        for key, grad in original.items():
            other = visible.get(key)
            if other is None or other.shape != grad.shape:
                continue
            delta = (grad - other).abs().max().item()
            scale = max(grad.abs().max().item(), other.abs().max().item(), 1e-12)
            if delta > 1e-6 * max(scale, 1.0) and delta > difference:
                difference, where = delta, key
        only_one = set(original) ^ set(visible)
        if only_one and where is None:
            where = sorted(only_one)[0]
            difference = float("nan")
    if where is not None:
        amount = "" if math.isnan(difference) else f" by up to {_number(difference)}"
        parts.append(f"gradients differ from the edit made visible to autograd{amount} (`{where}`)")
    elif tripped and original and visible:
        parts.append("the gradients happen to match at these inputs")
    if tripped or where is not None:
        return "confirmed", "; ".join(parts) + notes(run)
    if detach_error is not None and not tripped:
        raise Inconclusive(describe_error(detach_error, spec))
    if not original:
        raise Inconclusive("no gradient reached any parameter, so nothing could be compared" + notes(run))
    # An edit that changes nothing at these inputs (a clamp no value reaches)
    # leaves the gradients equal whatever the code: that refutes nothing.
    skipped, skipped_error, _ = _run_plan(spec, plan, lambda statement: [ast.Pass(lineno=statement.lineno, col_offset=0)])
    if skipped_error is None and set(skipped) == set(original) and all(torch.equal(skipped[k], original[k]) for k in original):
        raise Inconclusive(f"the edit of `{name}` changed no gradient at these inputs: without it every gradient is the same" + notes(run))
    return "refuted", (
        f"the edit of `{name}` overwrote no tensor saved for backward and the gradients equal those with the edit "
        f"made visible to autograd" + notes(run)
    )
