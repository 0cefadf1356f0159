"""The probe of DL402 (`.numpy()` on a tensor that requires grad).

Every `.numpy()` called from the finding's statement: what it raised, and
whether its tensor required grad.
"""

import torch

from detachlint.verify.runtime.standins import Inconclusive
from detachlint.verify.runtime.observe import called_from, notes, statement_lines
from detachlint.verify.runtime.user_code import find_working


def _numpy_available():
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True


def probe(spec, budget):
    """Record every `.numpy()` called from the finding's statement: what
    it raised, and whether its tensor required grad."""
    lines = statement_lines(spec)
    calls = []
    original = torch.Tensor.numpy
    has_numpy = _numpy_available()

    def numpy(self, *args, **kwargs):
        ours = called_from(spec, lines)
        try:
            value = original(self, *args, **kwargs)
        except RuntimeError as error:
            if ours:
                calls.append((self.requires_grad, str(error)))
            raise
        if ours:
            calls.append((self.requires_grad, None))
        return value

    torch.Tensor.numpy = numpy
    try:
        try:
            run = find_working(spec, budget=budget)
        except Inconclusive:
            if not calls:
                raise
            run = None  # it ran to the line before failing: what it saw stands
    finally:
        torch.Tensor.numpy = original
    suffix = notes(run) if run is not None else ""
    call = spec.get("hints", {}).get("call") or ".numpy()"
    for requires_grad, message in calls:
        if message and "requires grad" in message:
            return "confirmed", f"`{call}` raised RuntimeError: {message}" + suffix
        if message and requires_grad and not has_numpy:
            return "confirmed", (
                f"`{call}` was called on a tensor with requires_grad=True (numpy is not installed here, so torch "
                f"raised \"{message}\" before its requires-grad check)" + suffix
            )
    if calls:
        return "refuted", f"`{call}` ran on a tensor with requires_grad=False and returned an array" + suffix
    raise Inconclusive(f"`{call}` never ran with synthesized inputs")

