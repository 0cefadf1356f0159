"""The probe of DL301 (evaluation loop without `no_grad`).

Bytes of saved activations each call of the model on the finding's line
leaves alive, and whether its output requires grad.
"""

import weakref

import torch
from torch import nn

from detachlint.verify.runtime.standins import Enough, Inconclusive, tensors_in
from detachlint.verify.runtime.observe import called_from, notes, statement_lines
from detachlint.verify.runtime.user_code import find_working


class SavedBytes:
    """Bytes of activations autograd saved and still holds (parameters left out)."""

    def __init__(self):
        self.live = 0

    def pack(self, tensor):
        # Detached: a saved output holding itself (through its grad_fn) would
        # make a cycle through C++ that Python's collector cannot free.
        holder = _Saved(tensor.detach())
        is_parameter = tensor.requires_grad and (tensor.is_leaf or (tensor._base is not None and tensor._base.is_leaf))
        if not is_parameter:
            size = tensor.numel() * tensor.element_size()
            self.live += size
            weakref.finalize(holder, self._release, size)
        return holder

    def _release(self, size):
        self.live -= size

    @staticmethod
    def unpack(holder):
        return holder.tensor


class _Saved:
    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor):
        self.tensor = tensor


def probe(spec, budget):
    """Count, per call of the model on the finding's line, the bytes of saved
    activations the call left alive, and whether its output requires grad."""
    lines = statement_lines(spec)
    saved = SavedBytes()
    steps = []
    state = {"depth": 0, "start": 0, "ours": False}

    def pre(module, args):
        if state["depth"] == 0:
            state["ours"] = called_from(spec, lines)
            state["start"] = saved.live
        state["depth"] += 1

    def post(module, args, output):
        state["depth"] -= 1
        if state["depth"] == 0 and state["ours"]:
            # Any tensor of the output that carries a graph (a dict's `boxes`
            # may be plain while its `embeddings` are not).
            tensors = tensors_in(output)
            tensor = next((t for t in tensors if t.requires_grad), tensors[0] if tensors else None)
            steps.append(
                {
                    "bytes": saved.live - state["start"],
                    "live": saved.live,
                    "requires_grad": bool(tensor is not None and tensor.requires_grad),
                    "grad_fn": type(tensor.grad_fn).__name__ if tensor is not None and tensor.grad_fn is not None else None,
                }
            )
            if len(steps) >= 3:
                raise Enough()

    if spec["target"]["kind"] == "module":
        raise Inconclusive("the loop is top-level script code, which the verifier does not run")
    handles = [
        nn.modules.module.register_module_forward_pre_hook(pre),
        nn.modules.module.register_module_forward_hook(post),
    ]
    try:
        with torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
            try:
                run = find_working(spec, budget=budget, helpers={})
            except Inconclusive:
                if not steps:
                    raise
                run = None  # it ran to the line before failing: what it saw stands
    finally:
        for handle in handles:
            handle.remove()
        state["depth"] = 0
    if not steps:
        raise Inconclusive("the model call on this line never ran with synthesized inputs")
    call = spec.get("hints", {}).get("call") or "the model call"
    suffix = notes(run) if run is not None else ""
    first = steps[0]
    details = {"steps": [{"kept_bytes": s["bytes"], "live_bytes": s["live"]} for s in steps]}
    if not first["requires_grad"]:
        return "refuted", f"`{call}` returned requires_grad=False: no graph was recorded" + suffix, details
    per_step = sorted(s["bytes"] for s in steps)[len(steps) // 2]
    if per_step <= 0:
        return "refuted", f"`{call}` kept no saved activations alive (output grad_fn={first['grad_fn']})" + suffix, details
    text = (
        f"`{call}` returned requires_grad=True (grad_fn={first['grad_fn']}); each evaluation step kept "
        f"{_bytes(per_step)} of saved activations alive"
    )
    if len(steps) >= 3 and steps[-1]["live"] >= 2.5 * per_step:
        text += f", {_bytes(steps[-1]['live'])} held after {len(steps)} steps"
    return "confirmed", text + suffix, details


def _bytes(count):
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    return str(count)

