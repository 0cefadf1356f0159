"""The probe of DL205 (`t.detach_()` on a view, or on a tensor others still hold).

On a view: whether the tensor is a view just before the call, and whether
the call raises "Can't detach views in-place". On a shared tensor: its
graph just before the call, what the other holder holds just after it, and
whether the backward that follows raises or leaves the parameters upstream
of the tensor without gradient.
"""

import ast
import re
import warnings

import torch

from detachlint.verify.runtime.standins import Inconclusive, is_synthesized, tensors_in
from detachlint.verify.runtime.observe import (
    copy_statement,
    describe_error,
    first_backward_gradients,
    graph_leaves,
    inputs_requiring_grad,
    named_in_message,
    notes,
    passed_through,
    statement_error,
    statement_lines,
    tapping_backward,
    weighted_sum,
)
from detachlint.verify.runtime.user_code import find_working

_VIEW_ERROR = "Can't detach views in-place"


def probe(spec, budget):
    """`detach_()` on a view raises on its line; on a shared tensor, the other
    holder loses the graph and the backward after it shows the cut."""
    name = named_in_message(spec, r"^`([A-Za-z_][A-Za-z0-9_]*)\.detach_\(\)`")
    if _VIEW_ERROR in spec["message"]:
        return _on_view(spec, budget, name)
    holder = named_in_message(spec, r"`([^`]+)` is used afterwards")
    return _on_shared(spec, budget, name, holder)


def _state(value):
    if not isinstance(value, torch.Tensor):
        return None
    return {
        "view": value._is_view(),
        "requires_grad": value.requires_grad,
        "grad_fn": type(value.grad_fn).__name__ if value.grad_fn is not None else None,
        "shape": tuple(value.shape),
    }


def _on_view(spec, budget, name):
    """Run to the call: it raises "Can't detach views in-place", or runs through."""
    first, last = statement_lines(spec)
    match = re.search(r"when `([A-Za-z_][A-Za-z0-9_.]*)` holds one tensor", spec["message"])
    iterated = match.group(1) if match else None
    seen = {}

    def before(value, container=None):
        # The latest pass wins: in a loop, the one that raised is the last one seen.
        seen["tensor"] = _state(value)
        seen["container"] = container
        seen["passes"] = seen.get("passes", 0) + 1
        if seen["tensor"] is not None and seen["tensor"]["view"]:
            seen["views"] = seen.get("views", 0) + 1

    def rewrite(statement):
        watched = f", {iterated}" if iterated else ""
        return ast.parse(f"__dl_before__({name}{watched})").body + [statement]

    def after(statement):
        return ast.parse("__dl_done__()").body

    helpers = {"__dl_before__": before, "__dl_done__": lambda: seen.setdefault("done", True)}
    run = find_working(spec, rewrite=rewrite, after=after, helpers=helpers, budget=budget)
    state = seen.get("tensor")
    error, caught = statement_error(run)
    if error is not None and passed_through(error, spec, first, last):
        text = str(error).strip().splitlines()[0] if str(error).strip() else ""
        if _VIEW_ERROR in text:
            text = text.split(" If you are using")[0]
            if iterated and is_synthesized(seen.get("container")):
                # One tensor or a tuple is the finding's question; a made-up input answers nothing.
                raise Inconclusive(f"`{iterated}` is an input the reproduction synthesized as one tensor; the file's callers decide whether it holds one or a tuple")
            what = f"`{name}` was a view of another tensor (shape {state['shape']})" if state and state["view"] else f"`{name}` was a view"
            if iterated and isinstance(seen.get("container"), torch.Tensor):
                what = f"`{iterated}` held one tensor of shape {tuple(seen['container'].shape)}; its row `{name}` was a view"
            return "confirmed", f"{what}, and `{name}.detach_()` raised RuntimeError: {text}{caught}" + notes(run)
    if seen.get("done"):
        if state is None:
            raise Inconclusive(f"`{name}` was not a tensor when the line ran with synthesized inputs" + notes(run))
        container = seen.get("container")
        if iterated and not isinstance(container, torch.Tensor):
            kind = type(container).__name__
            size = f" of {len(container)}" if isinstance(container, (tuple, list)) else ""
            raise Inconclusive(
                f"`{iterated}` held a {kind}{size} at these inputs, whose items are whole tensors: `{name}.detach_()` ran "
                f"without raising; the finding is about when it holds one tensor" + notes(run)
            )
        passes = seen.get("passes", 1)
        when = f"on any of the {passes} times the line ran (the last shape {state['shape']})" if passes > 1 else f"when the line ran (shape {state['shape']})"
        if seen.get("views"):
            raise Inconclusive(f"`{name}` was a view {seen['views']} of the {passes} times the line ran, yet `{name}.detach_()` never raised" + notes(run))
        return "refuted", f"`{name}` was no view {when}, and `{name}.detach_()` ran without raising" + notes(run)
    if error is not None:
        raise Inconclusive(describe_error(error, spec, run))
    raise Inconclusive("the call never finished with synthesized inputs")


def _named(leaves, run):
    """Display names of leaf tensors: the parameter names of the run's modules."""
    names = {}
    if run is not None and run.synth is not None:
        for prefix, module in run.synth.modules.items():
            for parameter_name, parameter in module.named_parameters():
                names.setdefault(id(parameter), f"{prefix}.{parameter_name}" if prefix else parameter_name)
    shown = [f"`{names[id(leaf)]}`" if id(leaf) in names else f"a leaf of shape {tuple(leaf.shape)}" for leaf in leaves]
    return ", ".join(shown[:4]) + (f" and {len(shown) - 4} more" if len(shown) > 4 else "")


def _watch_shared(spec, budget, name, holder, around=None):
    """One run: `name` before the call, `holder` after it, and the backwards after it."""
    seen = {"backwards": []}

    def before(value):
        if "before" not in seen and isinstance(value, torch.Tensor):
            seen["before"] = _state(value)
            seen["tensor"] = value
            seen["leaves"] = [leaf for leaf in graph_leaves(value) if leaf is not value]

    def after(read):
        if "after" in seen or "tensor" not in seen:
            return
        try:
            held = read()
        except Exception as error:  # noqa: BLE001 - the holder may not be readable here
            seen["after"] = {"unreadable": f"{type(error).__name__}: {error}"}
            return
        tensors = tensors_in(held)
        tensor = seen["tensor"]
        same = any(t is tensor for t in tensors)
        other = next((t for t in tensors if t is not tensor), None)
        seen["after"] = {"same": same, "state": _state(tensor), "other": _state(other)}

    def grads(leaves):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return [None if leaf.grad is None else leaf.grad.detach().clone() for leaf in leaves]

    def backward_before(line):
        if "after" in seen:
            seen["grads"] = grads(seen["leaves"])

    def backward_after(line, error):
        if "after" in seen and "grads" in seen:
            now = grads(seen["leaves"])
            fed = [leaf for leaf, old, new in zip(seen["leaves"], seen.pop("grads"), now) if new is not None and (old is None or not torch.equal(old, new))]
            seen["backwards"].append((line, error, fed))

    def rewrite(statement):
        return ast.parse(f"__dl_before__({name})").body + [statement]

    def add_after(statement):
        return ast.parse(f"__dl_after__(lambda: {holder})").body

    helpers = {"__dl_before__": before, "__dl_after__": after}
    with tapping_backward(spec, before=backward_before, after=backward_after):
        try:
            run = find_working(spec, rewrite=rewrite, after=add_after, helpers=helpers, budget=budget, around=around)
        except Inconclusive:
            if "after" not in seen:
                raise
            run = None  # it ran past the call before failing: what it saw stands
    if run is not None and not seen["backwards"] and "after" in seen and seen["leaves"]:
        # No backward of the code's own: one from what the code returned.
        total = weighted_sum(tensors_in(run.result))
        if total is not None:
            old = grads(seen["leaves"])
            try:
                total.backward()
            except RuntimeError:
                return run, seen  # what the code returned cannot be backpropagated: no verdict from it
            now = grads(seen["leaves"])
            fed = [leaf for leaf, o, n in zip(seen["leaves"], old, now) if n is not None and (o is None or not torch.equal(o, n))]
            seen["returned"] = fed
    return run, seen


def _on_shared(spec, budget, name, holder):
    run, seen = _watch_shared(spec, budget, name, holder)
    suffix = notes(run) if run is not None else ""
    if "before" not in seen:
        raise Inconclusive(f"`{name}` was not a tensor when the line ran with synthesized inputs" + suffix)
    before = seen["before"]
    first, last = statement_lines(spec)
    if run is not None and run.error is not None and passed_through(run.error, spec, first, last):
        text = (str(run.error).strip().splitlines() or [""])[0].split(" If you are using")[0]
        raise Inconclusive(f"`{name}.detach_()` itself raised {type(run.error).__name__}: {text.rstrip('.')}; the finding describes a silent cut, not an error" + notes(run))
    if not before["requires_grad"]:
        # Perhaps only because the synthesized inputs carry no graph: again, with inputs that require grad.
        _, again = _watch_shared(spec, budget, name, holder, around=inputs_requiring_grad)
        if "before" in again and not again["before"]["requires_grad"]:
            return "refuted", f"`{name}` carried no graph when the line ran (requires_grad=False), even with the synthesized inputs requiring grad: `{name}.detach_()` cut nothing" + suffix
        raise Inconclusive(f"`{name}` carried no graph when the line ran (requires_grad=False): the synthesized inputs decide whether there is one to cut" + suffix)
    after = seen.get("after")
    if after is None:
        raise Inconclusive(f"the code stopped before `{holder}` could be read after the call" + suffix)
    if "unreadable" in after:
        raise Inconclusive(f"`{holder}` could not be read right after the call ({after['unreadable']})" + suffix)
    was = f"`{name}` just before the call: requires_grad=True, grad_fn={before['grad_fn']}"
    if not after["same"]:
        other = after["other"]
        if other is not None and other["requires_grad"]:
            return "refuted", f"{was}; right after it `{holder}` held another tensor, which kept its graph (grad_fn={other['grad_fn']})" + suffix
        raise Inconclusive(f"{was}; right after it `{holder}` did not hold `{name}`" + suffix)
    state = after["state"]
    if state["requires_grad"]:
        return "refuted", f"{was}; right after it, `{name}` (as `{holder}` holds it) still required grad (grad_fn={state['grad_fn']})" + suffix
    cut = f"{was}; right after it, `{holder}` held the same tensor with requires_grad=False, grad_fn=None"
    leaves = seen["leaves"]
    # The backward raised for want of the graph, or on a tensor a node had
    # saved that `detach_()` cut ("Trying to use a saved tensor that has been detached in-place").
    raised = next(((line, error) for line, error, _ in seen["backwards"] if error and ("does not require grad" in error or "detached in-place" in error)), None)
    if raised:
        return "confirmed", f"{cut}; the backward on line {raised[0]} raised RuntimeError: {raised[1]}" + suffix
    ran = [(line, fed) for line, error, fed in seen["backwards"] if error is None]
    if ran or "returned" in seen:
        where, fed = (f"the backward on line {ran[0][0]}", ran[0][1]) if ran else (f"a backward from what {run.entry} returned", seen["returned"])
        starved = [leaf for leaf in leaves if not any(leaf is f for f in fed)]
        if not leaves:
            return "confirmed", f"{cut}; {where} ran, and nothing upstream of `{name}` required grad to receive it" + suffix
        if starved:
            return "confirmed", f"{cut}; after {where}, {_named(starved, run)} upstream of `{name}` got no gradient" + suffix
        # Every leaf got a gradient from the loss's other terms: the cut
        # matters only if those gradients differ from a run without it.
        return _against_out_of_place(spec, budget, name, f"{cut}; {where} ran, and {_named(leaves, run)} upstream of `{name}` got gradients", suffix)
    stopped = f" ({describe_error(run.error, spec, run)})" if run is not None and run.error is not None else ""
    raise Inconclusive(f"{cut}, but no backward ran after it with synthesized inputs{stopped}" + suffix)


def _against_out_of_place(spec, budget, name, what, suffix):
    """The verdict from the first backward after the call, run as written
    and with `{name} = {name}.detach()` in its place (the other holder then
    keeps the graph): confirmed when their gradients differ."""
    records = []
    for out_of_place in (False, True):
        marked = {}

        def rewrite(statement, out_of_place=out_of_place):
            if not out_of_place:
                return [copy_statement(statement)]
            if isinstance(statement, ast.Expr) and ast.unparse(statement.value) == f"{name}.detach_()":
                return ast.parse(f"{name} = {name}.detach()").body  # `h.detach_()` as `h = h.detach()`
            return [_OutOfPlace(name).visit(copy_statement(statement))]  # `t = h.detach_()` as `t = h.detach()`

        helpers = {"__dl_called__": lambda marked=marked: marked.setdefault("after", True)}
        with first_backward_gradients(spec, when=lambda marked=marked: "after" in marked) as record:
            find_working(spec, rewrite=rewrite, after=lambda statement: ast.parse("__dl_called__()").body, helpers=helpers, budget=budget)
        records.append(record)
    cut, kept = records
    if "grads" not in cut or "grads" not in kept or len(cut["grads"]) > len(kept["grads"]):
        raise Inconclusive(f"{what}; no backward after it to compare with a run with `{name}.detach()` in its place" + suffix)
    # The run without the cut reaches the cut run's leaves and perhaps more,
    # and its graph, with a branch more, lists them in another order: each
    # gradient of the cut run is matched to an equal one of the other run.
    shared = min(len(cut["grads"]), len(kept["grads"]))
    unmatched = list(kept["grads"])
    differ = 0
    for mine in cut["grads"]:
        twin = next((i for i, theirs in enumerate(unmatched) if theirs.shape == mine.shape and torch.allclose(mine, theirs, rtol=1e-5, atol=1e-7)), None)
        if twin is None:
            differ += 1
        else:
            unmatched.pop(twin)
    if differ or len(kept["grads"]) > len(cut["grads"]):
        more = len(kept["grads"]) - len(cut["grads"])
        extra = f", and {more} more leaf tensors got gradients" if more else ""
        return "confirmed", f"{what}, which differ in {differ} of {shared} tensors from a run with `{name}.detach()` in its place, where the other holder keeps its graph{extra}" + suffix
    return "refuted", f"{what}, the same as in a run with `{name}.detach()` in its place, where the other holder keeps its graph" + suffix


class _OutOfPlace(ast.NodeTransformer):
    """`name.detach_()` as `name.detach()`: the other holders keep the graph."""

    def __init__(self, name):
        self.name = name

    def visit_Call(self, node):
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "detach_" and isinstance(func.value, ast.Name) and func.value.id == self.name:
            func.attr = "detach"
        return node
