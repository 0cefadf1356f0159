"""The probe of DL206 (the result of `.detach()` is dropped).

After the statement, the tensor still has a `grad_fn`: a graph upstream.
A name that holds an object of the file's own class, whose `detach` method
the statement calls, refutes the finding: that method works on the object.
"""

import ast

import torch

from detachlint.verify.runtime.standins import Inconclusive, tensors_in
from detachlint.verify.runtime.observe import named_in_message, notes, passed_through, statement_lines, user_line
from detachlint.verify.runtime.user_code import find_working


def _graphs(value):
    """How many of the tensors `value` holds carry a grad_fn, of how many."""
    tensors = tensors_in(value)
    return sum(t.grad_fn is not None for t in tensors), len(tensors)


def _own_method(spec, value, method):
    """`(Class.method, line)` when `value.method` is a function of the user's
    file (a state object's own `detach`), else None."""
    function = getattr(type(value), method, None)
    code = getattr(function, "__code__", None)
    if code is None or code.co_filename != spec["path"]:
        return None
    return function.__qualname__, code.co_firstlineno


def probe(spec, budget):
    """After the statement whose `.detach()` result is dropped, the tensor still has a grad_fn."""
    name = named_in_message(spec, r"`([A-Za-z_][A-Za-z0-9_.]*)` is unchanged")
    call = named_in_message(spec, r"^`([^`]+)`")
    if "detach" not in call:
        raise Inconclusive(f"only a dropped `.detach()` shows on the CPU; `{call}` changes nothing here either way")
    seen = {}

    def before(read):
        try:
            value = read()
        except (NameError, AttributeError):
            return  # a comprehension's variable: not bound around the statement
        if "before" not in seen:
            seen["before"] = value
            seen["graphs_before"] = None if isinstance(value, torch.Tensor) else _graphs(value)

    def after(read):
        try:
            value = read()
        except (NameError, AttributeError):
            return
        if "value" not in seen:
            seen["value"] = value
            if isinstance(value, torch.Tensor):
                seen["state"] = (value.is_leaf, value.requires_grad)
            else:
                seen["graphs_after"] = _graphs(value)

    observe = ast.parse(f"__dl_before__(lambda: {name})").body
    run = find_working(
        spec,
        rewrite=lambda statement: observe + [statement],
        after=lambda statement: ast.parse(f"__dl_after__(lambda: {name})").body,
        helpers={"__dl_before__": before, "__dl_after__": after},
        budget=budget,
    )
    if "before" in seen and not isinstance(seen["before"], torch.Tensor):
        own = _own_method(spec, seen["before"], call.rsplit(".", 1)[-1].split("(")[0])
        if own is not None:
            return _own_detach(spec, run, name, seen, own)
    if "state" not in seen:
        raise Inconclusive(f"`{name}` was not a tensor after the statement with synthesized inputs" + notes(run))
    is_leaf, requires_grad = seen["state"]
    grad_fn = getattr(seen["value"], "grad_fn", None)
    if requires_grad and grad_fn is not None:
        return "confirmed", f"`{name}` still had grad_fn={type(grad_fn).__name__} after `{call}`: it is attached to its graph" + notes(run)
    if requires_grad:
        # A leaf has no graph upstream: the detach would only have kept gradient out of it.
        raise Inconclusive(
            f"`{name}` was a leaf that requires grad (grad_fn=None) when the line ran: there was no graph upstream "
            f"for the dropped detach to cut at these inputs" + notes(run)
        )
    # The dropped call is a no-op either way; only an attached tensor shows the harm.
    raise Inconclusive(f"`{name}` did not require grad when the line ran, so the dropped detach had nothing to cut at these inputs" + notes(run))


def _own_detach(spec, run, name, seen, own):
    """The statement called the file's own `detach` of a state object: no
    tensor's `.detach()` result was dropped. What that method did, as observed."""
    qualname, line = own
    kind = type(seen["before"]).__name__
    first, last = statement_lines(spec)
    said = f"`{name}` was a `{kind}`, not a tensor: the statement calls the file's own `{qualname}` (line {line})"
    with_graph, held = seen["graphs_before"] or (0, 0)
    if run.error is not None and passed_through(run.error, spec, first, last):
        text = str(run.error).strip().splitlines()[0].split(". ")[0] if str(run.error).strip() else ""
        inner = user_line(run.error, spec)
        where = f" on line {inner}" if inner is not None else ""
        return "refuted", f"{said}, which raised {type(run.error).__name__}{where}: {text[:160]}" + notes(run)
    if "graphs_after" not in seen:
        raise Inconclusive(f"{said}, but the run stopped before the statement finished" + notes(run))
    left, count = seen["graphs_after"]
    if with_graph and not left:
        return "refuted", f"{said}: of the {count} tensor(s) it holds, {with_graph} had a grad_fn before the statement and none after" + notes(run)
    return "refuted", f"{said}: it holds {count} tensor(s), {with_graph} with a grad_fn before the statement, {left} after" + notes(run)
