"""The probe of DL503 (`.grad` of a non-leaf).

When the statement reads `.grad`, the tensor is not a leaf and its `.grad`
is None.
"""

from detachlint.verify.runtime.standins import Inconclusive
from detachlint.verify.runtime.observe import named_in_message, notes, observing
from detachlint.verify.runtime.user_code import find_working


def probe(spec, budget):
    """When the statement reads `.grad`, the tensor is not a leaf and its `.grad` is None."""
    name = named_in_message(spec, r"`([^`]+)` is computed")
    _, rewrite, helpers, seen = observing(spec, name, before=True)
    run = find_working(spec, rewrite=rewrite, helpers=helpers, budget=budget)
    if "state" not in seen:
        raise Inconclusive(f"`{name}` was not a tensor when `.grad` was read with synthesized inputs" + notes(run))
    is_leaf, requires_grad, has_grad, retains = seen["state"]
    state = f"`{name}`: is_leaf={is_leaf}, requires_grad={requires_grad}, retains_grad={retains}"
    if seen.get("synthesized"):
        # Its callers decide whether it is a leaf; the verifier's own input says nothing of them.
        raise Inconclusive(f"`{name}` is an argument the reproduction synthesized (a leaf); the file's callers decide what it is")
    if has_grad:
        return "refuted", f"{state}: its .grad held a gradient when read" + notes(run)
    if is_leaf:
        return "refuted", f"{state}: a leaf, whose .grad backward fills" + notes(run)
    return "confirmed", f"{state}: its .grad was None when read" + notes(run)
