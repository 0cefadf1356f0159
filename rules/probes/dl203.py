"""The probe of DL203 (`backward()` on a detached value).

The backward on the finding's line raises "does not require grad".
"""

from detachlint.verify.runtime.standins import Inconclusive
from detachlint.verify.runtime.observe import notes, statement_lines, watching_backward
from detachlint.verify.runtime.user_code import find_working


def probe(spec, budget):
    """The backward on the finding's line raises "does not require grad"."""
    with watching_backward(spec, statement_lines(spec)) as raised:
        try:
            run = find_working(spec, budget=budget)
        except Inconclusive:
            if not raised:
                raise
            run = None
    suffix = notes(run) if run is not None else ""
    for message in raised:
        if message and "does not require grad" in message:
            return "confirmed", f"backward raised RuntimeError: {message}" + suffix
    if raised:
        return "refuted", "backward ran without error: the value requires grad at run time" + suffix
    raise Inconclusive("the backward on this line never ran with synthesized inputs")
