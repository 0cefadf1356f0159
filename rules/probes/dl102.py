"""The probe of DL102 (`.data` rebound, `.data.resize_`).

The tensor around the statement: for a resize through `.data`, the shape the
alias took and the shape the tensor kept; for a rebound parameter, its shape,
dtype and storage before and after, whether anything still holds the old
storage, and what the backwards and the optimizer step after it raise; for
a rebound activation, the gradients of the backward after it, compared with
a run without the rebinding.
"""

import ast
import math
import re
import types
import warnings

import torch
from torch import nn
from torch.multiprocessing.reductions import StorageWeakRef

from detachlint.verify.runtime.standins import SYNTHESIZED, Inconclusive
from detachlint.verify.runtime.observe import (
    called_from,
    copy_statement,
    describe_error,
    notes,
    statement_lines,
    user_line,
    watching_backward,
)
from detachlint.verify.runtime.user_code import attempt, find_working

_RESIZES = ("resize_", "resize_as_")
_MAX_RECORDS = 8
_INVALID = "returned an invalid gradient"
_SIZE_MISMATCH = re.compile(r"size of tensor a \(\d+\) must match|shape mismatch|doesn't match the broadcast shape")


def _shape(shape):
    return "[" + ", ".join(str(n) for n in shape) + "]"


def _observed(spec, name, after_extra=None, values=True):
    """`rewrite`, `after` and helpers that record `name` around each run of the
    statement into the list returned (with copies of its values for the first
    run only, when `values`: a large parameter copied each time would not fit)."""
    records = []

    def copy(value):
        return value.detach().clone() if values and len(records) <= 1 else None

    def before(value):
        if len(records) >= _MAX_RECORDS:
            return  # the first runs of a loop say enough; copies of every one would not fit
        record = {"before": None, "after": None, "alias": None}
        if isinstance(value, torch.Tensor):
            record["before"] = {
                "shape": tuple(value.shape),
                "dtype": value.dtype,
                "device": value.device,
                "ptr": value.untyped_storage().data_ptr(),
                "values": None,
                "storage": StorageWeakRef(value.untyped_storage()),
            }
        records.append(record)
        if record["before"] is not None:
            record["before"]["values"] = copy(value)

    def after(value):
        if not records or records[-1]["after"] is not None:
            return
        record = records[-1]
        if isinstance(value, torch.Tensor):
            record["after"] = {
                "shape": tuple(value.shape),
                "dtype": value.dtype,
                "device": value.device,
                "ptr": value.untyped_storage().data_ptr(),
                "values": copy(value),
                "tensor": value,
            }
            if record["before"] is not None:
                record["old_alive"] = not record["before"]["storage"].expired()
        if after_extra is not None:
            after_extra(record, value)

    def rewrite(statement):
        return ast.parse(f"__dl_before__({name})").body + [copy_statement(statement)]

    def observe_after(statement):
        return ast.parse(f"__dl_after__({name})").body

    helpers = {"__dl_before__": before, "__dl_after__": after}
    return rewrite, observe_after, helpers, records


def _resize(spec, budget, name):
    """The alias `.data` returns takes the new shape; the tensor keeps its own."""
    lines = statement_lines(spec)
    rewrite, after, helpers, records = _observed(spec, name)
    originals = {method: getattr(torch.Tensor, method) for method in _RESIZES}

    def wrap(original):
        def resize(self, *args, **kwargs):
            result = original(self, *args, **kwargs)
            if called_from(spec, lines) and records and records[-1]["alias"] is None:
                records[-1]["alias"] = tuple(self.shape)
            return result

        return resize

    for method, original in originals.items():
        setattr(torch.Tensor, method, wrap(original))
    try:
        run = find_working(spec, rewrite=rewrite, after=after, helpers=helpers, budget=budget)
    finally:
        for method, original in originals.items():
            setattr(torch.Tensor, method, original)
    done = [r for r in records if r["before"] is not None and r["after"] is not None and r["alias"] is not None]
    if not done:
        if run.error is not None:
            raise Inconclusive(describe_error(run.error, spec, run))
        raise Inconclusive(f"`{name}` was not a tensor resized on this line with synthesized inputs" + notes(run))
    record = next((r for r in done if r["alias"] != r["before"]["shape"]), done[0])
    old, new, alias = record["before"]["shape"], record["after"]["shape"], record["alias"]
    if alias == old:
        raise Inconclusive(f"the resize asked for {_shape(alias)}, the shape `{name}` already had, at these inputs" + notes(run))
    if new == alias:
        return "refuted", f"`{name}` took the new shape {_shape(new)}: the resize reached it" + notes(run)
    text = f"`.data` was resized to {_shape(alias)}, while `{name}` kept its shape {_shape(new)} after the statement"
    before, after_values = record["before"]["values"], record["after"]["values"]
    if new == old and before is not None and after_values is not None and math.prod(alias) < math.prod(old):
        kept = int((before == after_values).sum())
        if kept:
            text += f"; {kept} of its {after_values.numel()} values were left as they were"
    return "confirmed", text + notes(run)


def _later_error(run):
    """The error the user's code raised after the statement that the new
    shape explains: an invalid gradient, or a size mismatch in an optimizer."""
    error = run.error
    if error is None:
        return None
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if _INVALID in text:
        return f"the code after it raised RuntimeError: {text}"
    tb, in_optim = error.__traceback__, False
    while tb is not None:
        if "torch/optim/" in tb.tb_frame.f_code.co_filename.replace("\\", "/"):
            in_optim = True
        tb = tb.tb_next
    if in_optim and _SIZE_MISMATCH.search(text):
        return f"the optimizer's step raised RuntimeError: {text}"
    return None


def _gradient_check(record, value):
    """Right after the statement: a gradient through the tensor, which
    autograd checks against the shape it recorded for it."""
    if not isinstance(value, torch.Tensor) or not value.requires_grad or not value.is_leaf:
        return
    try:
        with torch.enable_grad():
            torch.autograd.grad((value.view_as(value) * 1).sum(), value)
    except RuntimeError as error:
        record["grad_error"] = str(error).strip().splitlines()[0]
    except Exception:  # noqa: BLE001 - a tensor this check cannot handle says nothing
        record["grad_error"] = None
    else:
        record["grad_error"] = None


def _synthesized_storage(pointer):
    """Whether a tensor the reproduction synthesized lives in this storage."""
    for ref in list(SYNTHESIZED.values()):
        tensor = ref()
        if isinstance(tensor, torch.Tensor) and tensor.untyped_storage().data_ptr() == pointer:
            return True
    return False


def _parameter(spec, budget, name, reshaped):
    """A rebound parameter: shape, dtype and storage before and after; what
    still holds the old storage; what the code after it raises."""
    rewrite, after, helpers, records = _observed(spec, name, after_extra=_gradient_check, values=False)
    with watching_backward(spec, when=lambda: any(r["after"] is not None for r in records)) as backwards:
        # The first run that reaches the statement: what it raises after it is evidence.
        run = find_working(spec, rewrite=rewrite, after=after, helpers=helpers, budget=budget)
    done = [r for r in records if r["before"] is not None and r["after"] is not None]
    if not done:
        if run.error is not None:
            raise Inconclusive(describe_error(run.error, spec, run))
        raise Inconclusive(f"`{name}` was not a tensor when the statement ran with synthesized inputs" + notes(run))
    record = next((r for r in done if r["before"]["shape"] != r["after"]["shape"]), done[0])
    before, now = record["before"], record["after"]
    old = f"{str(before['dtype']).replace('torch.', '')} {_shape(before['shape'])}"
    new = f"{str(now['dtype']).replace('torch.', '')} {_shape(now['shape'])}"
    changed = (before["shape"], before["dtype"], before["device"]) != (now["shape"], now["dtype"], now["device"])
    invalid = next((m for m in backwards if m and _INVALID in m), None)
    later = f"the backward after it raised RuntimeError: {invalid}" if invalid else _later_error(run)
    if changed:
        text = f"`{name}` went from {old} to {new} without an error at the statement"
        if later:
            return "confirmed", f"{text}; {later}" + notes(run)
        if run.error is not None and not reshaped:
            line = user_line(run.error, spec)
            first = str(run.error).strip().splitlines()[0] if str(run.error).strip() else ""
            where = f" on line {line}" if line else ""
            text += f"; the code after it raised {type(run.error).__name__}: {first[:160]}{where}"
        if record.get("grad_error") and _INVALID in record["grad_error"]:
            return "confirmed", (
                f"{text}; a gradient through `{name}` right after it raised RuntimeError: {record['grad_error']}"
            ) + notes(run)
        if not reshaped:
            if _synthesized_storage(now["ptr"]):
                # The new shape or dtype is the verifier's own input's, not the program's.
                raise Inconclusive(f"`{name}` went from {old} to {new}, the storage of an input the reproduction synthesized" + notes(run))
            return "confirmed", text + notes(run)
        ran = [m for m in backwards if m is None]
        if ran and now["tensor"].grad is not None and tuple(now["tensor"].grad.shape) == now["shape"]:
            return "refuted", (
                f"`{name}` went from {old} to {new}, and the backward after it ran and filled its .grad at the new shape"
                + (f"; then {describe_error(run.error, spec, run).split(': ', 1)[-1]}" if run.error is not None else "")
            ) + notes(run)
        raise Inconclusive(
            f"`{name}` went from {old} to {new}; a gradient through it right after the statement ran without error "
            f"and no backward or optimizer step after it ran in the reproduction, so the callers decide" + notes(run)
        )
    if reshaped:
        raise Inconclusive(f"`{name}` kept its shape {_shape(now['shape'])} at these inputs" + notes(run))
    if before["ptr"] == now["ptr"]:
        return "refuted", f"`{name}` stayed on its own storage (same data_ptr, {new})" + notes(run)
    if record.get("old_alive"):
        return "confirmed", (
            f"`{name}` moved to new storage ({new}, unchanged) while another tensor still held its old storage after the statement"
        ) + notes(run)
    raise Inconclusive(
        f"`{name}` moved to new storage of the same dtype and shape ({new}), and nothing the reproduction ran still held "
        f"the old storage; views or optimizer state elsewhere in the program decide" + notes(run)
    )


def _in_scope(after, scope):
    """`after`, then an observer keeping the modules in scope at the
    statement (`model` the file's own call built, `self.model`): those the
    code trains may live only there. Modules only: a tensor kept would keep
    its graph alive past where the program lets it go."""

    def keep(names):
        scope.clear()
        for key, value in list(names.items()):
            if isinstance(value, nn.Module):
                scope[key] = value
            elif hasattr(value, "__dict__") and not isinstance(value, (type, torch.Tensor, types.ModuleType, types.FunctionType)):
                scope.update({f"{key}.{k}": v for k, v in list(vars(value).items()) if isinstance(v, nn.Module)})

    def observe(statement):
        return after(statement) + ast.parse("__dl102_scope__(locals())").body

    return observe, {"__dl102_scope__": keep}


def _named_parameters(synth, scope=None):
    seen = set()
    for prefix, module in list(synth.modules.items()) + list((scope or {}).items()):
        if not isinstance(module, nn.Module):
            continue
        for name, parameter in module.named_parameters():
            if id(parameter) not in seen:
                seen.add(id(parameter))
                yield (f"{prefix}.{name}" if prefix else name), parameter


def _with_roots(spec, run_once, scope=None):
    """Run; meanwhile record the values of what the user's code calls
    backward on. Then the parameters' gradients."""
    roots = []
    originals = (torch.Tensor.backward, torch.autograd.backward)

    inside = []

    def tensor_backward(self, *args, **kwargs):
        if called_from(spec):
            roots.append(self.detach().clone())
        inside.append(True)  # `Tensor.backward` calls `torch.autograd.backward`: one root
        try:
            return originals[0](self, *args, **kwargs)
        finally:
            inside.pop()

    def autograd_backward(tensors, *args, **kwargs):
        if not inside and called_from(spec):
            first = tensors[0] if isinstance(tensors, (list, tuple)) and tensors else tensors
            if isinstance(first, torch.Tensor):
                roots.append(first.detach().clone())
        return originals[1](tensors, *args, **kwargs)

    torch.Tensor.backward, torch.autograd.backward = tensor_backward, autograd_backward
    try:
        run = run_once()
    finally:
        torch.Tensor.backward, torch.autograd.backward = originals
    grads = {}
    if run is not None and run.synth is not None:
        grads = {n: p.grad.detach().clone() for n, p in _named_parameters(run.synth, scope) if p.grad is not None}
    return run, roots, grads


def _activation(spec, budget, name):
    """The backward after the rebinding, against the same run without it:
    the same loss, other gradients means backward used the new values."""
    rewrite, after, helpers, records = _observed(spec, name)
    scope, other_scope = {}, {}
    after, kept = _in_scope(after, scope)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run, roots, grads = _with_roots(
            spec,
            lambda: find_working(spec, rewrite=rewrite, after=after, helpers={**helpers, **kept}, need_finish=True, budget=budget),
            scope,
        )
    # A loss that broadcast `name` against a target of another shape saved
    # the broadcast copy, which the rebinding does not reach.
    broadcast = any("different to the input size" in str(w.message) for w in caught)
    done = [r for r in records if r["before"] is not None and r["after"] is not None]
    if not done:
        raise Inconclusive(f"`{name}` was not a tensor when the statement ran with synthesized inputs" + notes(run))
    record = done[0]
    before, now = record["before"], record["after"]
    unchanged = before["values"] is not None and now["values"] is not None and before["shape"] == now["shape"]
    if unchanged and torch.equal(before["values"], now["values"]):
        raise Inconclusive(f"the rebinding left the values of `{name}` unchanged at these inputs" + notes(run))
    if not roots or not grads:
        raise Inconclusive("no backward reached a parameter after the rebinding with synthesized inputs" + notes(run))

    def without(statement):
        return [ast.Pass()]

    keep_other, kept_other = _in_scope(lambda statement: [], other_scope)
    _, other_roots, other = _with_roots(
        spec, lambda: attempt(spec, run.plan, rewrite=without, after=keep_other, helpers=kept_other), other_scope
    )
    if not other_roots or not other:
        raise Inconclusive("the run without the rebinding reached no backward to compare with" + notes(run))
    first, second = roots[0], other_roots[0]
    if first.shape != second.shape or not torch.allclose(first, second, rtol=1e-6, atol=1e-8):
        raise Inconclusive("the rebinding changed the value backward was called on, not only what backward used" + notes(run))
    difference, where = 0.0, None
    for key, grad in grads.items():
        reference = other.get(key)
        if reference is None or reference.shape != grad.shape:
            continue
        delta = (grad - reference).abs().max().item()
        if delta > 1e-6 * max(grad.abs().max().item(), reference.abs().max().item(), 1.0) and delta > difference:
            difference, where = delta, key
    loss = f"{first.item():.4g}" if first.numel() == 1 else "the same values"
    if where is not None:
        return "confirmed", (
            f"the rebinding changed the values of `{name}`; the backward after it ran on the same loss ({loss}) as a run "
            f"without the rebinding, but the gradients differ by up to {difference:.2g} (`{where}`)"
        ) + notes(run)
    if broadcast:
        raise Inconclusive(
            f"the gradients equal those of a run without the rebinding, but the loss broadcast `{name}` against a "
            f"synthesized target of another shape (torch warned), so the graph kept a copy the rebinding cannot reach" + notes(run)
        )
    return "refuted", (
        f"the gradients after the rebinding equal those of a run without it (same loss, {loss}): backward did not use `{name}`'s new values"
    ) + notes(run)


def probe(spec, budget):
    """The resized alias against the tensor's kept shape; a rebound
    parameter's shape, storage and the errors after it; a rebound
    activation's gradients against a run without the rebinding."""
    message = spec["message"]
    resized = re.match(r"`(.+)\.data\.(resize_|resize_as_)\(\.\.\.\)`", message)
    if resized:
        return _resize(spec, budget, resized.group(1))
    swapped = re.match(r"`(.+)\.data = \.\.\.` swaps", message)
    if swapped is None:
        raise Inconclusive("the finding names no tensor")
    name = swapped.group(1)
    if "backward runs on the new values" in message:
        return _activation(spec, budget, name)
    return _parameter(spec, budget, name, reshaped="still expect the old shape" in message)
