"""The probe of DL202 (a loss term computed from a detached output).

The probe DL202 and DL303 share (their findings both say a value carries no
graph): the tensor assigned on the finding's line has requires_grad False
and no grad_fn, and the backward that follows raises "does not require
grad" or runs on the loss's other terms only. A generator step that judges a
detached fake (`D(fake.detach())`, "cut from `G`"): the judge's output, read
where the code computes it, has a graph that reaches none of the
generator's trainable parameters (the judge's own parameters do not count).
"""

import ast
import copy
import re
import sys

import torch
from torch import nn

from detachlint.verify.runtime.standins import Inconclusive
from detachlint.verify.runtime.observe import graph_leaves, notes
from detachlint.verify.runtime.shared_probes import probe_graphless_term
from detachlint.verify.runtime.user_code import find_working


def probe(spec, budget):
    """A judged detached fake: the judge's output reaches none of the
    generator's parameters; otherwise the shared graphless-term probe."""
    match = re.match(r"`([^`]+)` judges `[^`]+`, cut from `([A-Za-z_][\w.]*)`", spec["message"])
    if match is None:
        return probe_graphless_term(spec, budget)
    return _judged_fake(spec, budget, match.group(1), match.group(2))


class _Wrap(ast.NodeTransformer):
    """Wraps the call whose source is `text` in `__dl_term__(...)`."""

    def __init__(self, text):
        self.text, self.done = text, False

    def visit_Call(self, node):
        if not self.done and ast.unparse(node) == self.text:
            self.done = True
            return ast.Call(ast.Name("__dl_term__", ast.Load()), [node], [])
        return self.generic_visit(node)


def _read(frame, dotted):
    """The object `a.b.c` names where the code runs, or None."""
    head, *rest = dotted.split(".")
    value = frame.f_locals[head] if head in frame.f_locals else frame.f_globals.get(head)
    for part in rest:
        value = getattr(value, part, None)
    return value


def _judged_fake(spec, budget, judged, generator):
    text = ast.unparse(ast.parse(judged, mode="eval").body)
    seen = {}

    def observe(value):
        if "value" not in seen:
            frame = sys._getframe(1)
            seen["value"] = value
            if isinstance(value, torch.Tensor):
                seen["grad_fn"] = type(value.grad_fn).__name__ if value.grad_fn is not None else None
                seen["leaves"] = {id(leaf) for leaf in graph_leaves(value)}
            seen["generator"] = _read(frame, generator)
        return value

    def rewrite(statement):
        wrap = _Wrap(text)
        new = wrap.visit(copy.deepcopy(statement))
        seen["wrapped"] = wrap.done
        return [ast.fix_missing_locations(new)]

    run = find_working(spec, rewrite=rewrite, helpers={"__dl_term__": observe}, budget=budget)
    if not seen.get("wrapped"):
        raise Inconclusive(f"`{judged}` is not an expression of the finding's statement")
    if "value" not in seen:
        raise Inconclusive(f"`{judged}` never ran with synthesized inputs" + notes(run))
    if "leaves" not in seen:
        raise Inconclusive(f"`{judged}` was a `{type(seen['value']).__name__}`, not a tensor" + notes(run))
    model = seen["generator"]
    if not isinstance(model, nn.Module):
        raise Inconclusive(f"`{generator}` was no module where `{judged}` ran ({type(model).__name__})" + notes(run))
    trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    if not trainable:
        raise Inconclusive(f"`{generator}` has no parameter with requires_grad=True, so it has nothing to train" + notes(run))
    reached = [n for n, p in trainable if id(p) in seen["leaves"]]
    if reached:
        names = ", ".join(f"`{generator}.{n}`" for n in reached[:3]) + (f" and {len(reached) - 3} more" if len(reached) > 3 else "")
        return "refuted", f"the graph of `{judged}` (grad_fn={seen['grad_fn']}) reaches {names}" + notes(run)
    state = f"grad_fn={seen['grad_fn']}, but its graph" if seen["grad_fn"] else "no grad_fn: its graph"
    return "confirmed", (
        f"`{judged}` has {state} reaches none of the {len(trainable)} trainable parameters of `{generator}`"
    ) + notes(run)
