"""The probe of DL303 (a forward run under `no_grad` in a training step).

The probe DL202 and DL303 share (their findings both say a value carries no
graph): the tensor assigned on the finding's line has requires_grad False
and no grad_fn, and the backward that follows raises "does not require
grad" or runs on the loss's other terms only. A function run under
`inference_mode()` whose outputs the file hands to training code elsewhere:
that training code, run as the file calls it, raises "Inference tensors
cannot be saved for backward" after the function ran.
"""

import sys

from detachlint.verify.runtime.standins import Inconclusive
from detachlint.verify.runtime.observe import notes, running_attempt, user_line
from detachlint.verify.runtime.shared_probes import probe_graphless_term
from detachlint.verify.runtime.user_code import find_working

_RAISED = "Inference tensors cannot be saved for backward"


def probe(spec, budget):
    """Inference tensors handed to training code: that code raises; otherwise
    the shared graphless-term probe."""
    if spec.get("loss_spec") and _RAISED in spec["message"]:
        return _handed_to_training(spec, budget)
    return probe_graphless_term(spec, budget)


def _handed_to_training(spec, budget):
    """Run the training code the finding names, as the file calls it; count
    the runs of the function decorated on the finding's line."""
    line = spec["line"]
    base = {k: v for k, v in spec.items() if k not in ("call_site", "script", "loss_spec")}
    training = dict(base, **spec["loss_spec"])
    counts = {}  # id(attempt) -> [attempt, runs of the function, its name]

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename == spec["path"] and frame.f_code.co_firstlineno == line:
            run = running_attempt()
            counts.setdefault(id(run), [run, 0, getattr(frame.f_code, "co_qualname", frame.f_code.co_name)])[1] += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        run = find_working(training, budget=budget)
    except Inconclusive:
        # The training code raised before reaching its backward: the attempt that ran the function tells.
        run = next((r for r, _, _ in counts.values() if r is not None and r.error is not None and _RAISED in str(r.error)), None)
        if run is None:
            raise
    finally:
        sys.setprofile(previous)
    _, ran, name = counts.get(id(run), [run, 0, "the decorated function"])
    calls = [name] * ran
    where = f"line {training['line']}"
    error = run.error
    text = str(error).strip().splitlines()[0] if error is not None and str(error).strip() else ""
    if error is not None and _RAISED in text and calls:
        raised = user_line(error, spec)
        at = f" on line {raised}" if raised is not None else ""
        return "confirmed", (
            f"after `{name}` (line {line}) ran {len(calls)} time(s), the training code raised "
            f"{type(error).__name__}{at}: {text.split('. ')[0]}"
        ) + notes(run)
    if not calls:
        raise Inconclusive(f"the function on line {line} never ran in the training code (reaching {where})" + notes(run))
    if error is None and run.finished:
        return "refuted", f"`{name}` (line {line}) ran {len(calls)} time(s) and the training code ran through {where} without raising" + notes(run)
    raise Inconclusive(f"`{name}` ran, but the training code stopped before {where}: {type(error).__name__}: {text[:160]}" + notes(run))
