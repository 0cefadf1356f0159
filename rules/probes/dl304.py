"""The probe of DL304 (a grad-mode call that is never entered).

Right after the bare grad-mode statement, autograd is still on.
"""

from detachlint.verify.runtime.standins import Inconclusive
from detachlint.verify.runtime.observe import named_in_message, notes, observing
from detachlint.verify.runtime.user_code import find_working


def probe(spec, budget):
    """Right after the bare grad-mode statement, autograd is still on."""
    call = named_in_message(spec, r"^`([^`]+)`")
    after, _, helpers, seen = observing(spec, "None")
    run = find_working(spec, after=after, helpers=helpers, budget=budget)
    if "grad_enabled" not in seen:
        raise Inconclusive("the code after the statement never ran with synthesized inputs" + notes(run))
    if seen["grad_enabled"]:
        return "confirmed", f"autograd was still on right after `{call}`" + notes(run)
    return "refuted", f"autograd was off right after `{call}`" + notes(run)
