"""The probe of DL206 (the result of `.detach()` is dropped).

After the statement, the tensor still has a `grad_fn`: a graph upstream.
"""

from detachlint.verify.runtime.standins import Inconclusive
from detachlint.verify.runtime.observe import named_in_message, notes, observing
from detachlint.verify.runtime.user_code import find_working


def probe(spec, budget):
    """After the statement whose `.detach()` result is dropped, the tensor still has a grad_fn."""
    name = named_in_message(spec, r"`([A-Za-z_][A-Za-z0-9_.]*)` is unchanged")
    call = named_in_message(spec, r"^`([^`]+)`")
    if "detach" not in call:
        raise Inconclusive(f"only a dropped `.detach()` shows on the CPU; `{call}` changes nothing here either way")
    after, _, helpers, seen = observing(spec, name)
    run = find_working(spec, after=after, helpers=helpers, budget=budget)
    if "state" not in seen:
        raise Inconclusive(f"`{name}` was not a tensor after the statement with synthesized inputs" + notes(run))
    is_leaf, requires_grad, _, _ = seen["state"]
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
