"""The probe of DL402 (`.numpy()` on a tensor that requires grad).

Every `.numpy()` called from the finding's statement: what it raised, and
whether its tensor required grad; when none did, the same run again with the
synthesized inputs requiring grad, to tell code that cuts the graph from a
tensor that only lacked one because the inputs carried none.
"""

import contextlib
import time

import torch

from detachlint.verify.runtime.standins import Inconclusive
from detachlint.verify.runtime.observe import called_from, inputs_requiring_grad, notes, running_attempt, statement_lines
from detachlint.verify.runtime.user_code import find_working, grad_off_required


def _numpy_available():
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True


def _watch(spec, budget, around=None):
    """(run, calls): one run of the code, with every `.numpy()` called from
    the finding's statement as (requires_grad, RuntimeError message or None)."""
    lines = statement_lines(spec)
    calls = []
    seen = {}
    original = torch.Tensor.numpy

    def numpy(self, *args, **kwargs):
        ours = called_from(spec, lines)
        if ours:
            run = running_attempt()
            if seen.get("run") is not run:
                # A new attempt: what an earlier one saw does not count.
                calls.clear()
                seen["run"] = run
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
            run = find_working(spec, budget=budget, around=around)
        except Inconclusive:
            if not calls:
                raise
            # It ran to the line before failing: what it saw stands, on what that run stood in.
            run = seen.get("run")
    finally:
        torch.Tensor.numpy = original
    return run, calls


def probe(spec, budget):
    """Record every `.numpy()` called from the finding's statement: what
    it raised, and whether its tensor required grad."""
    has_numpy = _numpy_available()
    started = time.monotonic()
    run, calls = _watch(spec, budget)
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
    if not calls:
        if run is not None and run.hits:
            raise Inconclusive(f"line {spec['line']} ran with synthesized inputs, but called no `.numpy()` of a tensor" + suffix)
        raise Inconclusive(f"`{call}` never ran with synthesized inputs")
    plain = f"`{call}` ran on a tensor with requires_grad=False and returned an array"
    if grad_off_required(spec) is not None:
        # The program runs this line with autograd off, and so did the run.
        return "refuted", plain + suffix
    # The tensor may lack grad only because the synthesized inputs carry none.
    made = []

    @contextlib.contextmanager
    def requiring_grad():
        with inputs_requiring_grad() as count:
            made.append(count)
            yield

    try:
        left = None if not budget else max(budget - (time.monotonic() - started), 0.5)
        again_run, again = _watch(spec, left, around=requiring_grad)
    except Inconclusive as reason:
        raise Inconclusive(f"{plain}, but a run with the synthesized inputs requiring grad did not reach it: {reason}" + suffix)
    if any(requires_grad or (message and "requires grad" in message) for requires_grad, message in again):
        raise Inconclusive(
            f"{plain} with plain synthesized inputs; with the inputs requiring grad its tensor required grad: "
            f"what the callers pass decides" + suffix
        )
    if not again:
        raise Inconclusive(f"{plain}, but a run with the synthesized inputs requiring grad called no `.numpy()` from it" + suffix)
    if again_run is not None:
        notes(again_run)  # its stand-ins count for the verdict too
    if not made or not made[-1]:
        # No synthesized floating-point input: the program's own values decided.
        return "refuted", plain + suffix
    return "refuted", f"{plain}, also with the synthesized inputs requiring grad" + suffix
