"""The probe of DL501 (`.to()` makes a non-leaf whose `.grad` stays None).

The tensor built on the finding's line is not a leaf, and its `.grad`
stays None after backward.
"""

import ast
import re
import warnings

import torch

from detachlint.verify.runtime.standins import Inconclusive
from detachlint.verify.runtime.observe import notes, watching_backward
from detachlint.verify.runtime.user_code import find_working


def probe(spec, budget):
    """The tensor built on the finding's line is not a leaf, and its `.grad`
    stays None after backward."""
    seen = {}

    named = re.match(r"`([A-Za-z_]\w*)` is not a leaf", spec["message"])

    def after(statement):
        if isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name):
            name = statement.targets[0].id
        elif named is not None and isinstance(statement, ast.Expr):
            # `embedding.requires_grad_(True)`: the tensor the message names, as the statement leaves it.
            name = named.group(1)
        else:
            return []
        seen["name"] = name
        return [ast.parse(f"__dl_observe__(lambda: {name})").body[0]]

    def observe(read):
        try:
            value = read()
        except NameError:
            return
        if isinstance(value, torch.Tensor):
            seen["tensor"] = value
            if "first" not in seen:
                seen["first"] = (value.is_leaf, value.requires_grad)

    with watching_backward(spec) as backwards:
        run = find_working(spec, after=after, helpers={"__dl_observe__": observe}, budget=budget)
    tensor = seen.get("tensor")
    if tensor is None:
        raise Inconclusive("the tensor on this line was never built with synthesized inputs")
    name = seen.get("name", "the tensor")
    is_leaf, requires_grad = seen["first"]
    if is_leaf:
        statement = spec.get("hints", {}).get("statement") or ""
        if re.search(r"\.(to|cuda)\(", statement):
            # `.to(device)` to the device a tensor is already on returns the
            # tensor itself; the reproduction runs on the CPU only.
            raise Inconclusive(f"`{name}` stayed a leaf because `.to()` had nothing to move on the CPU; on another device it is a non-leaf copy")
        return "refuted", f"`{name}` is a leaf (is_leaf=True, requires_grad={requires_grad})" + notes(run)
    ran = "the code's backward" if any(outcome is None for outcome in backwards) else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reading .grad of a non-leaf warns
        if ran is None and tensor.requires_grad:
            try:
                (tensor.float() * 1).sum().backward()
                ran = "a backward from it"
            except RuntimeError:
                pass
        grad = tensor.grad
    state = f"`{name}`: is_leaf=False, requires_grad={requires_grad}"
    if grad is not None:
        return "refuted", f"{state}, but its .grad holds a gradient after {ran or 'backward'} (retain_grad() keeps it)" + notes(run)
    if ran is None:
        raise Inconclusive(f"{state}; no backward ran with synthesized inputs, so .grad was never filled" + notes(run))
    return "confirmed", f"{state}; .grad None after {ran}" + notes(run)
