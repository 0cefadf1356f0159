"""The probe of DL303 (a forward run under `no_grad` in a training step).

The probe DL202 and DL303 share (their findings both say a value carries no
graph): the tensor assigned on the finding's line has requires_grad False
and no grad_fn, and the backward that follows raises "does not require
grad" or runs on the loss's other terms only.
"""

from detachlint.verify.runtime.shared_probes import probe_graphless_term as probe  # noqa: F401
