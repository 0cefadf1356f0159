"""The probe of DL301 (evaluation loop without `no_grad`).

Bytes of saved activations each call of the model on the finding's line
leaves alive, and whether its output requires grad. A `model.forward(x)`
call counts as a call of the model (module hooks do not fire on it), and a
function of the file called on the line (`model.predict(x)`) as one call,
with the graph of the model calls it makes.
"""

import dis
import os
import sys
import weakref

import torch
from torch import nn

from detachlint.verify.runtime.standins import Enough, Inconclusive, is_synthesized, tensors_in
from detachlint.verify.runtime.observe import called_from, describe_error, notes, statement_lines
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


def _graph_saved_bytes(root, limit=5000):
    """Bytes of the activations the graph under `root` saved for backward
    (its nodes' `_saved_*` tensors, parameters left out, each storage once)."""
    seen_nodes, seen_storage, total, stack = set(), set(), 0, [root]
    while stack and len(seen_nodes) < limit:
        node = stack.pop()
        if node is None or id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        for attribute in dir(node):
            if not attribute.startswith("_saved_"):
                continue
            try:
                value = getattr(node, attribute)
            except (RuntimeError, AttributeError):
                continue  # freed, or not a tensor
            for tensor in value if isinstance(value, (tuple, list)) else (value,):
                if not isinstance(tensor, torch.Tensor) or (tensor.requires_grad and tensor.is_leaf):
                    continue
                key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape))
                if key not in seen_storage:
                    seen_storage.add(key)
                    total += tensor.numel() * tensor.element_size()
        stack.extend(next_node for next_node, _ in node.next_functions)
    return total


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

    def pre(module, args, ours=None):
        if state["depth"] > 0 and state.get("method"):
            state["inner_calls"] += 1
        if state["depth"] == 0:
            state["ours"] = called_from(spec, lines) if ours is None else ours
            state["helper"] = state["ours"] and ours is None and _through_helper(spec, lines)
            state["start"] = saved.live
            # The bytes depend on the batch: say when the verifier made it up.
            first = next(iter(tensors_in(args)), None)
            state["batch"] = first.shape[0] if first is not None and first.dim() and is_synthesized(first) else None
        state["depth"] += 1

    def post(module, args, output, method=False):
        state["depth"] -= 1
        if state["depth"] > 0 and state.get("method") and state["inner"] is None:
            # Inside a method of the model called on the line: the first model
            # output that carries a graph says one was recorded.
            state["inner"] = next((t for t in tensors_in(output) if t.requires_grad), None)
        # None: the call raised (a profiled `forward` returns None then).
        if state["depth"] == 0 and method and not state["inner_calls"]:
            state["method"] = False  # it called no model: not an evaluation step
            return
        if state["depth"] == 0 and state["ours"] and (output is not None or method):
            # Any tensor of the output that carries a graph (a dict's `boxes`
            # may be plain while its `embeddings` are not).
            tensors = tensors_in(output)
            tensor = next((t for t in tensors if t.requires_grad), tensors[0] if tensors else None)
            inner = method and (tensor is None or not tensor.requires_grad) and state["inner"] is not None
            if inner:
                tensor = state["inner"]
            kept = saved.live - state["start"]
            if kept <= 0 and tensor is not None and tensor.grad_fn is not None:
                # The program's own saved-tensor hooks (innermost) hid the
                # saves from ours: read them off the graph itself.
                kept = _graph_saved_bytes(tensor.grad_fn)
            steps.append(
                {
                    "bytes": kept,
                    "live": saved.live,
                    "requires_grad": bool(tensor is not None and tensor.requires_grad),
                    "grad_fn": type(tensor.grad_fn).__name__ if tensor is not None and tensor.grad_fn is not None else None,
                    "method": method,
                    "inner": bool(inner) or state["helper"],
                    "batch": state.get("batch"),
                }
            )
            state["method"], state["inner"] = False, None
            if len(steps) >= 3:
                raise Enough()

    if spec["target"]["kind"] == "module":
        raise Inconclusive("the loop is top-level script code, which the verifier does not run")
    handles = [
        nn.modules.module.register_module_forward_pre_hook(pre),
        nn.modules.module.register_module_forward_hook(post),
    ]
    direct = _direct_forward(spec, lines, pre, post, state)
    previous = sys.getprofile()
    sys.setprofile(direct)
    try:
        with torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
            try:
                run = find_working(spec, budget=budget, helpers={})
            except Inconclusive:
                if not steps:
                    raise
                run = None  # it ran to the line before failing: what it saw stands
    finally:
        sys.setprofile(previous)
        for handle in handles:
            handle.remove()
        state["depth"] = 0
    if not steps and run is not None and run.error is not None:
        raise Inconclusive(describe_error(run.error, spec, run))
    if not steps:
        raise Inconclusive("the model call on this line never ran with synthesized inputs")
    call = spec.get("hints", {}).get("call") or "the model call"
    suffix = notes(run) if run is not None else ""
    first = steps[0]
    details = {"steps": [{"kept_bytes": s["bytes"], "live_bytes": s["live"]} for s in steps]}
    if not first["requires_grad"]:
        if first["method"]:
            return "refuted", f"`{call}`: no model call it made returned an output with requires_grad=True: no graph was recorded" + suffix, details
        return "refuted", f"`{call}` returned requires_grad=False: no graph was recorded" + suffix, details
    per_step = sorted(s["bytes"] for s in steps)[len(steps) // 2]
    if per_step <= 0 and first["method"]:
        # The method's graph was recorded, then freed before it returned.
        raise Inconclusive(f"`{call}` ran its model with a graph (grad_fn={first['grad_fn']}) but kept no saved activations alive after it returned" + suffix)
    if per_step <= 0:
        return "refuted", f"`{call}` kept no saved activations alive (output grad_fn={first['grad_fn']})" + suffix, details
    returned = "ran a model call whose output had" if first["inner"] else "returned"
    text = (
        f"`{call}` {returned} requires_grad=True (grad_fn={first['grad_fn']}); "
        f"{'each call of it' if first['method'] else 'each evaluation step'} kept {_bytes(per_step)} of saved activations alive"
    )
    if first.get("batch"):
        text += f" (at a synthesized batch of {first['batch']}; yours scales it)"
    if len(steps) >= 3 and steps[-1]["live"] >= 2.5 * per_step:
        text += f", {_bytes(steps[-1]['live'])} held after {len(steps)} steps"
    return "confirmed", text + suffix, details


_TORCH = os.path.dirname(torch.__file__)


def _through_helper(spec, lines):
    """Whether the model call being entered was made by code of the user's
    program other than the finding's statement (`run_epoch(model, ...)`,
    whose loop calls the model): the first frame outside torch is not on
    the statement's lines."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_TORCH):
        frame = frame.f_back
    if frame is None:
        return False
    return frame.f_code.co_filename != spec["path"] or not lines[0] <= frame.f_lineno <= lines[1]


# A frame left through one of these returned; otherwise an exception unwound it.
_RETURNS = {dis.opmap[name] for name in ("RETURN_VALUE", "RETURN_CONST") if name in dis.opmap}


def _direct_forward(spec, lines, pre, post, state):
    """A profile function that treats `model.forward(x)` called on the
    finding's lines as a call of the model: module hooks do not fire on it."""
    running = []

    def on_line(caller):
        return caller is not None and caller.f_code.co_filename == spec["path"] and lines[0] <= caller.f_lineno <= lines[1]

    def profile(frame, event, value):
        if event == "call" and not running and frame.f_code.co_name != "forward" and frame.f_code.co_filename == spec["path"]:
            # A method of the file called on the line (`model.predict(x)`):
            # the model calls it makes count as one evaluation step.
            if on_line(frame.f_back) and not frame.f_code.co_name.startswith("<") and state["depth"] == 0:
                running.append(frame)
                state["method"], state["inner"], state["inner_calls"] = True, None, 0
                pre(None, (), ours=True)
        elif event == "call" and frame.f_code.co_name == "forward":
            caller = frame.f_back
            module = frame.f_locals.get("self")
            if (
                caller is not None
                and caller.f_code.co_filename == spec["path"]
                and lines[0] <= caller.f_lineno <= lines[1]
                and isinstance(module, nn.Module)
            ):
                running.append(frame)
                pre(module, (), ours=True)
        elif event == "return" and running and frame is running[-1]:
            running.pop()
            if value is None and frame.f_code.co_code[frame.f_lasti] not in _RETURNS:
                state["depth"] -= 1  # it raised: no step
                state["method"] = False
                return
            post(frame.f_locals.get("self"), (), value, method=bool(state.get("method")))

    return profile


def _bytes(count):
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    return str(count)

