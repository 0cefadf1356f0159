"""The probe of DL204 (in-place edit through a detached alias).

The source tensor's values just before and after the edit through its
detached alias, and what the first backward after it says: an error, or
gradients that differ from a second run where the alias is a copy. An edit
that changes values nothing later reads for backward is no confirmation.
"""

import ast
import re

import torch

from detachlint.verify.runtime.standins import Inconclusive
from detachlint.verify.runtime.observe import (
    copy_statement,
    describe_error,
    first_backward_gradients,
    notes,
    returned_backward,
    watching_backward,
)
from detachlint.verify.runtime.user_code import find_working


def probe(spec, budget):
    """The edit through the detached alias, watched: the source tensor's values
    just before and just after the edit, and what the backwards that follow say."""
    match = re.search(r"also changes `([^`]+)`", spec["message"])
    if match is None:
        raise Inconclusive("the finding names no source tensor")
    source = match.group(1)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", source):
        # A detached operand saved by a product and edited later: what backward says.
        # A run may stop at the very backward that raises (the file's own training call).
        with watching_backward(spec) as backwards:
            run = find_working(spec, budget=budget)
        raised = next((m for m in backwards if m and "modified by an inplace operation" in m), None)
        if not raised and not run.finished:
            with watching_backward(spec) as backwards:
                run = find_working(spec, need_finish=True, budget=budget)
            raised = next((m for m in backwards if m and "modified by an inplace operation" in m), None)
        if raised:
            return "confirmed", f"the backward after the edit raised RuntimeError: {raised.split(' Hint:')[0]}" + notes(run)
        if backwards:
            return "refuted", "every backward after the edit ran without error" + notes(run)
        raise Inconclusive("no backward ran after the edit with synthesized inputs" + notes(run))
    seen = {}

    def snapshot(value):
        if isinstance(value, torch.Tensor) and "before" not in seen:
            seen["before"] = value.detach().clone()

    def compare(value):
        if isinstance(value, torch.Tensor) and "after" not in seen and "before" in seen:
            seen["after"] = value.detach().clone()

    def rewrite(statement):
        return ast.parse(f"__dl_before__({source})").body + [copy_statement(statement)]

    def after(statement):
        return ast.parse(f"__dl_after__({source})").body

    helpers = {"__dl_before__": snapshot, "__dl_after__": compare}
    # A run to the end first: the backward after the edit decides.
    for need_finish in (True, False):
        seen.clear()
        with watching_backward(spec, when=lambda: "after" in seen) as backwards, first_backward_gradients(spec, when=lambda: "after" in seen) as edited:
            try:
                run = find_working(spec, rewrite=rewrite, after=after, helpers=helpers, budget=budget, need_finish=need_finish)
            except Inconclusive:
                if not need_finish:
                    raise
                continue
        break
    if "after" not in seen:
        if "before" in seen and run.error is not None:
            raise Inconclusive(describe_error(run.error, spec, run))
        raise Inconclusive(f"`{source}` was not a tensor when the edit ran with synthesized inputs" + notes(run))
    before, after_edit = seen["before"], seen["after"]
    raised = next((message for message in backwards if message and "modified by an inplace operation" in message), None)
    if raised:
        raised = raised.split(" Hint:")[0]
        return "confirmed", f"the edit changed `{source}` in place, and the backward after it raised RuntimeError: {raised}" + notes(run)
    if before.shape == after_edit.shape and torch.equal(before, after_edit):
        return "refuted", f"`{source}` held the same values before and after the edit at these inputs" + notes(run)
    changed = "its shape" if before.shape != after_edit.shape else f"{int((before != after_edit).sum())} of its {before.numel()} values"
    what = f"the edit changed `{source}` in place ({changed})"
    returned = "grads" not in edited
    if returned:
        # No backward of the code's own (a `forward`): one from what it returned.
        edited = returned_backward(run)
        if edited is None:
            stopped = f" ({describe_error(run.error, spec, run)})" if run.error is not None else ""
            raise Inconclusive(f"{what}, and no backward ran after it to show an effect on gradients{stopped}" + notes(run))
        if "error" in edited:
            if "modified by an inplace operation" in edited["error"]:
                return "confirmed", f"{what}, and a backward from what {run.entry} returned raised RuntimeError: {edited['error'].split(' Hint:')[0]}" + notes(run)
            raise Inconclusive(f"{what}; a backward from what {run.entry} returned raised RuntimeError: {edited['error'][:160]}" + notes(run))
    alias = _alias(spec["message"])
    if alias is None:
        raise Inconclusive(f"{what}; the alias it went through is no name to copy, to compare the gradients with" + notes(run))
    copied_seen = {}

    def copy_first(statement):
        return ast.parse(f"{alias} = {alias}.clone()").body + [copy_statement(statement)]

    def mark(statement):
        return ast.parse("__dl_copied__()").body

    helpers = {"__dl_copied__": lambda: copied_seen.setdefault("after", True)}
    with first_backward_gradients(spec, when=lambda: "after" in copied_seen) as copied:
        copy_run = find_working(spec, rewrite=copy_first, after=mark, helpers=helpers, budget=budget)
    if returned:
        copied = returned_backward(copy_run) or {}
    if "grads" not in copied or len(copied["grads"]) != len(edited["grads"]):
        raise Inconclusive(f"{what}; the run with `{alias}` a copy did not reach the same backward to compare" + notes(run))
    differ, largest = 0, 0.0
    for mine, theirs in zip(edited["grads"], copied["grads"]):
        if mine.shape != theirs.shape:
            raise Inconclusive(f"{what}; the run with `{alias}` a copy built another graph" + notes(run))
        gap = float((mine - theirs).abs().max()) if mine.numel() else 0.0
        if gap > 1e-6 * max(1.0, float(theirs.abs().max()) if theirs.numel() else 0.0):
            differ, largest = differ + 1, max(largest, gap)
    if differ:
        return "confirmed", (
            f"{what}, and the backward after it: {differ} of {len(edited['grads'])} gradient tensors differ from a run "
            f"where `{alias}` is a copy (largest difference {largest:.3g})" + notes(run)
        )
    return "refuted", f"{what}, but the backward after it computed the same gradients as a run where `{alias}` is a copy" + notes(run)


def _alias(message):
    """The detached alias the finding's edit went through, when it is a name (or attribute path)."""
    match = re.search(r"whose storage `([^`]+)` shares", message)
    if match and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*", match.group(1)):
        return match.group(1)
    return None
