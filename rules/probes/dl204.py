"""The probe of DL204 (in-place edit through a detached alias).

The source tensor's values just before and after the edit through its
detached alias, and what the backwards after it say.
"""

import ast
import re

import torch

from detachlint.verify.runtime.standins import Inconclusive
from detachlint.verify.runtime.observe import copy_statement, describe_error, notes, watching_backward
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
    with watching_backward(spec, when=lambda: "after" in seen) as backwards:
        run = find_working(spec, rewrite=rewrite, after=after, helpers=helpers, budget=budget)
    if "after" not in seen:
        if "before" in seen and run.error is not None:
            raise Inconclusive(describe_error(run.error, spec, run))
        raise Inconclusive(f"`{source}` was not a tensor when the edit ran with synthesized inputs" + notes(run))
    before, after_edit = seen["before"], seen["after"]
    raised = next((message for message in backwards if message and "modified by an inplace operation" in message), None)
    if raised:
        raised = raised.split(" Hint:")[0]
        return "confirmed", f"the edit changed `{source}` in place, and the backward after it raised RuntimeError: {raised}" + notes(run)
    if before.shape != after_edit.shape or not torch.equal(before, after_edit):
        changed = "its shape" if before.shape != after_edit.shape else (
            f"{int((before != after_edit).sum())} of its {before.numel()} values"
        )
        return "confirmed", f"the edit changed `{source}` in place ({changed})" + notes(run)
    return "refuted", f"`{source}` held the same values before and after the edit at these inputs" + notes(run)
