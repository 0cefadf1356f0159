"""The probe of DL602 (a GAN's discriminator fed the live generator output).

The generator output on the finding's line (the parameters its graph
reaches), their `.grad` just before and after the discriminator's backward,
and what the generator step's backward raises.
"""

import ast
import re

import torch

from detachlint.verify.runtime.standins import Enough, Inconclusive
from detachlint.verify.runtime.observe import copy_statement, describe_error, graph_leaves, notes, statement_lines, tapping_backward
from detachlint.verify.runtime.user_code import find_working


# What each kind of finding says happens, and the backward it names:
# (kind, pattern for the backward's text and line, the error it says that backward raises).
_KINDS = (
    ("second time", r"the generator step's `([^`]+)` \(line (\d+)\) then raises", "backward through the graph a second time"),
    ("in place", r"weights that `([^`]+)` \(line (\d+)\) still needs", "modified by an inplace operation"),
    ("wasted", r": `([^`]+)` \(line (\d+)\) runs a second backward pass", None),
)
_ERRORS = tuple(error for _, _, error in _KINDS if error)


def _grads(leaves):
    return [None if t.grad is None else t.grad.detach().clone() for t in leaves]


def _received(leaves, before, after):
    """(how many of `leaves` the backward changed the .grad of, the norm of the change)."""
    count, total = 0, 0.0
    for old, new in zip(before, after):
        if new is None:
            continue
        delta = new if old is None else new - old
        if bool(delta.ne(0).any()):
            count += 1
            total += float(delta.float().pow(2).sum())
    return count, total ** 0.5


def probe(spec, budget):
    """Run the GAN step: the discriminator's backward fills the generator's
    `.grad` through the live output, and the generator step's backward
    raises what the finding says; refuted when the output carries no graph
    into the generator or the backward runs through."""
    fake = re.search(r"into the generator through `([^`]+)`", spec["message"])
    if fake is None:
        raise Inconclusive("the finding names no generator output")
    fake = fake.group(1)
    for kind, pattern, _ in _KINDS:
        named = re.search(pattern, spec["message"])
        if named is not None:
            break
    else:
        raise Inconclusive("the finding names no backward to watch")
    named_text, named_line = named.group(1), int(named.group(2))
    # A backward written over several lines reports any of them as the line running.
    low, high = statement_lines(dict(spec, line=named_line, end_line=named_line))
    seen = {}

    def observe_fake(read):
        if "fake" in seen:
            return
        try:
            value = read()
        except Exception:  # noqa: BLE001 - reported below as never a tensor
            value = None
        if isinstance(value, torch.Tensor):
            seen["fake"] = (value.requires_grad, type(value.grad_fn).__name__ if value.grad_fn is not None else None)
            seen["leaves"] = graph_leaves(value)

    def rewrite(statement):
        return ast.parse(f"__dl_fake__(lambda: {fake})").body + [copy_statement(statement)]

    def reset(statement):
        # A new attempt: what an earlier one saw does not count.
        seen.clear()
        return ast.parse("__dl_fake_done__()").body

    def statement_done():
        seen.setdefault("done", True)

    def before(line):
        if seen.get("done") and "d_backward" not in seen and (kind != "wasted" or low <= line <= high):
            seen["d_backward"] = line
            seen["grads_before"] = _grads(seen.get("leaves", []))

    def after(line, error):
        if "d_backward" in seen and "d_result" not in seen:
            seen["d_result"] = (error, _received(seen.get("leaves", []), seen["grads_before"], _grads(seen.get("leaves", []))))
            if kind == "wasted":
                raise Enough()  # the probe has all it needs
            return
        if "d_result" in seen and low <= line <= high and "named_result" not in seen:
            seen["named_result"] = error
            raise Enough()  # also in place of the error, which the probe has read

    helpers = {"__dl_fake__": observe_fake, "__dl_fake_done__": statement_done}
    with tapping_backward(spec, before=before, after=after):
        run = find_working(spec, rewrite=rewrite, after=reset, helpers=helpers, need_finish=True, budget=budget)
    suffix = notes(run)
    if "fake" not in seen:
        raise Inconclusive(f"`{fake}` was not a tensor when this line ran with synthesized inputs" + suffix)
    requires_grad, grad_fn = seen["fake"]
    if not requires_grad:
        return "refuted", f"`{fake}` carries no graph at run time (requires_grad=False): the discriminator's backward cannot reach the generator" + suffix
    leaves = seen.get("leaves", [])
    if "d_result" not in seen:
        raise Inconclusive(f"no backward ran after this line with synthesized inputs (`{fake}`: grad_fn={grad_fn})" + suffix)
    d_error, (count, norm) = seen["d_result"]
    d_line = seen["d_backward"]
    if d_error is not None and "backward through the graph a second time" in d_error:
        # The discriminator's own graph is new; the part an earlier backward
        # freed lies behind `fake`, in the generator: the backward went there.
        return "confirmed", (
            f"the discriminator's backward (line {d_line}) went on through `{fake}` (grad_fn={grad_fn}) into the "
            f"generator's graph, which an earlier backward had freed, and raised RuntimeError: {d_error.split('. ')[0]}"
        ) + suffix
    if d_error is not None:
        raise Inconclusive(f"the discriminator's backward (line {d_line}) raised RuntimeError: {d_error.split(' Hint:')[0]}" + suffix)
    # Almost always the generator's parameters; other leaves (an input with requires_grad) are named as such.
    noun = "parameter" if all(isinstance(t, torch.nn.Parameter) for t in leaves) else "leaf tensor"
    total = f"{len(leaves)} {noun}{'s' if len(leaves) != 1 else ''}"
    leaked = (
        f"the discriminator's backward (line {d_line}) ran on through `{fake}` (grad_fn={grad_fn}) and put gradients "
        f"into {count} of the {total} its graph reaches (norm {norm:.4g})"
    )
    details = {"generator_parameters": len(leaves), "received_gradient": count}
    if kind == "wasted":
        if count:
            return "confirmed", leaked + suffix, details
        return "refuted", (
            f"the discriminator's backward (line {d_line}) left the .grad of the {total} behind `{fake}` as it was"
        ) + suffix, details
    if "named_result" not in seen:
        stopped = f": {describe_error(run.error, spec, run)}" if run.error is not None else ""
        raise Inconclusive(f"`{named_text}` (line {named_line}) never ran after the discriminator's backward with synthesized inputs{stopped}" + suffix)
    raised = seen["named_result"]
    # Either error is the generator step failing on the graph the
    # discriminator's backward went through (which one depends on whether an
    # optimizer step edited the weights in between): both confirm.
    if raised is not None and any(text in raised for text in _ERRORS):
        said = raised.split(". ")[0]  # its first sentence
        return "confirmed", f"{leaked}; then `{named_text}` (line {named_line}) raised RuntimeError: {said}" + suffix, details
    if raised is not None:
        raise Inconclusive(f"`{named_text}` (line {named_line}) raised another RuntimeError: {raised.split(' Hint:')[0][:160]}" + suffix)
    return "refuted", f"`{named_text}` (line {named_line}) ran without error after the discriminator's backward" + (
        f" ({count} of the {total} behind `{fake}` received gradients from it)" if count else ""
    ) + suffix, details
