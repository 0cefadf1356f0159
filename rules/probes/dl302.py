"""The probe of DL302 (`backward()` with autograd off).

The statement on the finding's line raises the RuntimeError the finding
names; refuted when it runs through. For a loss a helper forced to require
grad, the tensor the backward starts from: a leaf whose graph reaches no
parameter confirms, a `grad_fn` refutes.
"""

import torch

from detachlint.verify.runtime.standins import Inconclusive
from detachlint.verify.runtime.observe import called_from, describe_error, graph_leaves, notes, statement_lines
from detachlint.verify.runtime.shared_probes import raises_on_its_line
from detachlint.verify.runtime.user_code import find_working

_raises = raises_on_its_line("does not require grad")


def probe(spec, budget):
    """The backward raises "does not require grad", or, for a forced loss, starts from a leaf."""
    if "reaches no parameter" not in spec["message"]:
        return _raises(spec, budget)
    lines = statement_lines(spec)
    seen = []
    original = torch.Tensor.backward

    def backward(tensor, *args, **kwargs):
        if not seen and called_from(spec, lines):
            parameters = [t for t in graph_leaves(tensor) if isinstance(t, torch.nn.Parameter)]
            seen.append((tensor.is_leaf, type(tensor.grad_fn).__name__ if tensor.grad_fn is not None else None, len(parameters)))
        return original(tensor, *args, **kwargs)

    torch.Tensor.backward = backward
    try:
        run = find_working(spec, budget=budget)
    except Inconclusive:
        if not seen:
            raise
        run = None
    finally:
        torch.Tensor.backward = original
    suffix = notes(run) if run is not None else ""
    if not seen:
        if run is not None and run.error is not None:
            raise Inconclusive(describe_error(run.error, spec, run))
        raise Inconclusive("the backward on this line never ran with synthesized inputs" + suffix)
    is_leaf, grad_fn, reached = seen[0]
    if grad_fn is not None or reached:
        return "refuted", f"the backward started from a tensor with grad_fn={grad_fn}, whose graph reaches {reached} parameter(s)" + suffix
    return "confirmed", f"the backward ran from a leaf (is_leaf={is_leaf}, grad_fn=None): its graph reaches no parameter" + suffix
