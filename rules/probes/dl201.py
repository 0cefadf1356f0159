"""The probe of DL201 (a `detach()` freezes the layers upstream of it).

Forward and backward through the module: the named submodules' trainable
parameters must all keep `grad None`.
"""

import re

from torch import nn

from detachlint.verify.runtime.standins import Inconclusive, tensors_in
from detachlint.verify.runtime.observe import notes, weighted_sum
from detachlint.verify.runtime.user_code import find_working


def _names(names, limit=4):
    quoted = [f"`{n}`" for n in names]
    if len(quoted) > limit:
        return ", ".join(quoted[:limit]) + f" and {len(quoted) - limit} more"
    return ", ".join(quoted)


# ---------------------------------------------------------------------------
# Probes: one per rule code, each returns (status, evidence).
def probe(spec, budget):
    """Run forward and backward; the named submodules' trainable parameters
    must all keep `grad None`."""
    members = re.findall(r"`([^`]+)`", spec["message"].split(" never ")[0])
    run = find_working(spec, need_finish=True, budget=budget)
    module = run.synth.modules.get("")
    if module is None:
        raise Inconclusive(f"`{spec['target'].get('class')}` is not an nn.Module")
    outputs = tensors_in(run.result)
    loss = weighted_sum(outputs)
    if loss is not None:
        loss.backward()
    frozen, trained, not_trainable = [], [], []
    for member in members:
        sub = module
        try:
            for part in member.split("."):
                sub = getattr(sub, part)
        except AttributeError:
            raise Inconclusive(f"the module has no `{member}` when built with synthesized arguments")
        if not isinstance(sub, nn.Module):
            raise Inconclusive(f"`{member}` is not a module at run time")
        params = [(f"{member}.{n}", p) for n, p in sub.named_parameters() if p.requires_grad]
        if not list(sub.parameters()):
            raise Inconclusive(f"`{member}` has no parameters")
        if not params:
            not_trainable.append(member)
        for name, parameter in params:
            (frozen if parameter.grad is None else trained).append(name)
    others = [n for n, p in module.named_parameters() if p.grad is not None and not any(n.startswith(m + ".") for m in members)]
    details = {
        "parameters": [
            {"name": n, "requires_grad": p.requires_grad, "got_grad": p.grad is not None, "numel": p.numel()}
            for n, p in list(module.named_parameters())[:400]
        ]
    }
    if trained:
        return "refuted", f"{_names(trained)} got gradients after backward through {run.entry}" + notes(run), details
    if not frozen:
        return "refuted", f"{_names(not_trainable)} {'has' if len(not_trainable) == 1 else 'have'} no parameter with requires_grad=True: nothing trainable is cut off" + notes(run), details
    tail = f"; {_names(others, 2)} did get gradients" if others else ("; no output required grad" if loss is None else "")
    return "confirmed", f"{_names(frozen)}: requires_grad=True, grad None after backward{tail}" + notes(run), details
