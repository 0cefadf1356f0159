"""The probe of DL505 (`requires_grad` forced on a loss whose graph was cut).

The forced value just before the statement (a graph, or none), what the
statement leaves (a new leaf), and the backward after it: which leaves it
reaches, and the `.grad` of the parameters of the modules the run called.
"""

import ast
import re
import warnings

import torch
from torch import nn

from detachlint.verify.runtime.standins import Inconclusive, SYNTHESIZED, tensors_in
from detachlint.verify.runtime.observe import (
    attempt_key,
    describe_error,
    graph_leaves,
    inputs_requiring_grad,
    notes,
    passed_through,
    statement_lines,
    tapping_backward,
)
from detachlint.verify.runtime.user_code import find_working

_WRAPPERS = ("Variable", "tensor", "as_tensor")
_NUMPY_CUT = "Can't call numpy() on Tensor that requires grad"


def _operands(statement):
    """(the value the statement forces, as read before it; the name holding the result after it)."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target, value = statement.targets[0], statement.value
        if isinstance(target, ast.Attribute) and target.attr == "requires_grad":
            return ast.unparse(target.value), ast.unparse(target.value)
        if isinstance(value, ast.Call) and value.args and ast.unparse(value.func).split(".")[-1] in _WRAPPERS:
            return ast.unparse(value.args[0]), ast.unparse(target)
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        func = statement.value.func
        if isinstance(func, ast.Attribute) and func.attr == "requires_grad_":
            return ast.unparse(func.value), ast.unparse(func.value)
    return None


def _state(value):
    return {
        "is_leaf": value.is_leaf,
        "requires_grad": value.requires_grad,
        "grad_fn": type(value.grad_fn).__name__ if value.grad_fn is not None else None,
    }


def _watch(spec, budget, around=None):
    """One run: the forced value before the statement, the result after it,
    and the first backward after it."""
    seen = {"modules": {}}

    def before(read):
        if "before" not in seen:
            try:
                value = read()
            except Exception as error:  # noqa: BLE001 - a name bound only by the statement itself
                seen["before"] = f"unreadable value ({type(error).__name__})"
                return
            # `torch.tensor([[cos(t), -sin(t)], ...])`: the tensors in the nested list, the one with a graph first.
            held = [value] if isinstance(value, torch.Tensor) else [t for t in tensors_in(value)] if isinstance(value, (list, tuple)) else []
            held.sort(key=lambda t: t.grad_fn is None)
            seen["before"] = _state(held[0]) if held else type(value).__name__
            if held:
                # A graph that reaches no parameter comes from the inputs alone: nothing to train through it.
                seen["before_parameters"] = len({id(leaf) for t in held for leaf in graph_leaves(t) if isinstance(leaf, nn.Parameter)})
            seen["inputs"] = sum(1 for ref in SYNTHESIZED.values() if isinstance(ref(), torch.Tensor) and ref().is_floating_point())

    def after(read):
        if "after" not in seen:
            value = read()
            if isinstance(value, torch.Tensor):
                seen["after"] = _state(value)
                seen["reaches"] = [leaf for leaf in graph_leaves(value) if leaf is not value]

    def rewrite(statement):
        operands = _operands(statement)
        if operands is None:
            return [statement]
        seen["names"] = operands
        return ast.parse(f"__dl_before__(lambda: {operands[0]})").body + [statement] + ast.parse(f"__dl_after__(lambda: {operands[1]})").body

    def called(module, args):
        # Kept per attempt: the run returned is one of several tried.
        seen["modules"].setdefault(attempt_key(), {}).setdefault(id(module), module)

    def backward_after(line, error):
        if "after" in seen and "backward" not in seen:
            modules = seen["modules"].get(attempt_key(), {}).values()
            parameters = {id(p): p for m in modules for p in m.parameters() if p.requires_grad}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                filled = sum(1 for p in parameters.values() if p.grad is not None)
            seen["backward"] = (line, error, len(parameters), filled)

    helpers = {"__dl_before__": before, "__dl_after__": after}
    handle = nn.modules.module.register_module_forward_pre_hook(called)
    try:
        with tapping_backward(spec, after=backward_after):
            try:
                run = find_working(spec, rewrite=rewrite, helpers=helpers, budget=budget, around=around)
            except Inconclusive:
                if "before" not in seen:
                    raise
                run = None  # it ran to the statement before failing: what it saw stands
    finally:
        handle.remove()
    return run, seen


def probe(spec, budget):
    """Confirmed when the forced value carried no graph before the statement
    (or the statement made a new leaf of it) and the backward after it
    reaches no parameter; refuted when it kept its graph."""
    first, last = statement_lines(spec)
    run, seen = _watch(spec, budget)
    suffix = notes(run) if run is not None else ""
    if "names" not in seen:
        raise Inconclusive("the statement forces no value the probe can read")
    source, forced = seen["names"]
    before = seen.get("before")
    if before is None:
        raise Inconclusive(f"`{source}` was never read before the statement with synthesized inputs" + suffix)
    if not isinstance(before, dict):
        raise Inconclusive(f"`{source}` was a {before}, not a tensor, when the statement ran" + suffix)
    error = run.error if run is not None else None
    was = f"`{source}` just before the statement: requires_grad={before['requires_grad']}, grad_fn={before['grad_fn']}"
    if error is not None and passed_through(error, spec, first, last):
        text = str(error).strip().splitlines()[0] if str(error).strip() else ""
        if before["grad_fn"] is not None and "only change requires_grad flags of leaf" in text:
            return "refuted", f"{was}; the statement raised RuntimeError: {text.split(' If you want')[0].rstrip('.')}, so it hides no cut" + suffix
        raise Inconclusive(describe_error(error, spec, run))
    after = seen.get("after")
    if after is None:
        raise Inconclusive(f"{was}; `{forced}` was not a tensor after it" + suffix)
    if before["grad_fn"] is not None and after["grad_fn"] is not None:
        return "refuted", f"{was}: it kept its graph, the statement changed nothing, and a backward from `{forced}` reaches {len(seen['reaches'])} leaf tensors" + suffix
    if before["requires_grad"] and before["grad_fn"] is None:
        raise Inconclusive(f"{was}: already a leaf that requires grad, the statement changed nothing" + suffix)
    if before["grad_fn"] is None and seen.get("inputs"):
        # No graph, perhaps only because the synthesized inputs carry none: again, with inputs that require grad.
        try:
            _, again = _watch(spec, budget, around=inputs_requiring_grad)
        except Inconclusive as reason:
            text = str(reason)
            if _NUMPY_CUT not in text:
                raise Inconclusive(f"{was}, but a run with the synthesized inputs requiring grad did not reach the statement: {text}" + suffix)
            # The code goes through numpy on the way: no graph of the inputs can pass it.
            line = re.search(r" on line (\d+)", text)
            again = {"before": {"grad_fn": None}, "numpy": f"line {line.group(1)} raised" if line else "the code raised"}
        other = again.get("before")
        if not isinstance(other, dict):
            raise Inconclusive(f"{was}, but a run with the synthesized inputs requiring grad did not read it" + suffix)
        if other["grad_fn"] is not None and not again.get("before_parameters"):
            was += f", and with the synthesized inputs requiring grad its graph (grad_fn={other['grad_fn']}) reaches no parameter"
        elif other["grad_fn"] is not None:
            raise Inconclusive(f"{was} with plain synthesized inputs, grad_fn={other['grad_fn']} with inputs that require grad: what the callers pass decides whether the graph is cut" + suffix)
        elif "numpy" in again:
            was += f" (with the synthesized inputs requiring grad, {again['numpy']} RuntimeError: {_NUMPY_CUT})"
        else:
            was += ", also with the synthesized inputs requiring grad"
    if before["grad_fn"] is None:
        made = f"{was}: its graph was cut before it; after it `{forced}` is a leaf with requires_grad={after['requires_grad']}"
    else:
        made = f"{was}; the statement made `{forced}` a new leaf (grad_fn=None), cut from that graph"
    if seen["reaches"]:
        return "refuted", f"{made}, and a backward from it still reaches {len(seen['reaches'])} leaf tensors" + suffix
    backward = seen.get("backward")
    if backward is None:
        return "confirmed", f"{made}: a backward from it reaches no tensor but itself" + suffix
    line, raised, parameters, filled = backward
    if raised:
        raise Inconclusive(f"{made}; the backward on line {line} raised RuntimeError: {raised}" + suffix)
    kept = f"; the {parameters} parameters of the modules the run called kept grad None" if parameters and not filled else (
        f"; {filled} of the {parameters} parameters of the modules the run called hold a gradient from elsewhere" if parameters else ""
    )
    return "confirmed", f"{made}; the backward on line {line} ran from it and reached no parameter{kept}" + suffix
