"""The hazards of the articles detachlint started from, each written here in
this project's own code, in the shapes the articles show them: inside a
function and at module level, through a name bound to `.detach()` or
`.data`, and the harmless uses the articles contrast them with."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from detachlint.engine import lint_source
from detachlint.registry import load_rules

RULES = [rule for rule in load_rules().values() if rule.default_enabled]


def _codes(source: str):
    result = lint_source(textwrap.dedent(source).encode(), "seed.py", RULES)
    assert not result.errors, result.errors
    return [(f.line, f.code) for f in result.findings]


EDIT_ALIAS = """
    import torch

    def main():
        w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
        act = w.tanh()
        view = act.{cut}
        view.mul_(0)
        act.sum().backward()
        return w.grad
"""

EDIT_ALIAS_MODULE_LEVEL = """
    import torch

    w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    act = w.tanh()
    view = act.{cut}
    view.mul_(0)
    act.sum().backward()
"""


@pytest.mark.parametrize("template, line", [(EDIT_ALIAS, 8), (EDIT_ALIAS_MODULE_LEVEL, 7)], ids=["function", "module"])
@pytest.mark.parametrize("cut, code", [("detach()", "DL204"), ("data", "DL101")])
def test_an_edit_through_a_name_bound_to_the_cut_is_flagged(template, line, cut, code):
    assert (line, code) in _codes(template.format(cut=cut))


def test_backward_on_the_detached_copy_is_flagged():
    found = _codes(
        """
        import torch

        def main():
            w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
            act = w.tanh()
            copy = act.detach()
            copy.sum().backward()
        """
    )
    assert (8, "DL203") in found


def test_a_layer_frozen_by_a_detach_in_forward_is_flagged_by_name():
    found = lint_source(
        textwrap.dedent(
            """
            import torch
            from torch import nn

            class Stack(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.first = nn.Linear(6, 6)
                    self.second = nn.Linear(6, 6)
                    self.third = nn.Linear(6, 6)

                def forward(self, x):
                    hidden = self.second(self.first(x))
                    return self.third(hidden.detach())
            """
        ).encode(),
        "seed.py",
        RULES,
    ).findings
    assert [f.code for f in found] == ["DL201"]
    assert "`first` and `second` never get gradients" in found[0].message


@pytest.mark.parametrize(
    "source",
    [
        # A detached copy that is only read.
        """
        import torch

        def main():
            w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
            act = w.tanh()
            print(act.detach().numpy())
            act.sum().backward()
        """,
        # A detach whose copy is never edited.
        """
        import torch

        def main():
            w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
            act = w.tanh()
            copy = act.detach()
            act.sum().backward()
            return copy
        """,
        # The edited value is the root of backward only: no backward function saved it.
        """
        import torch

        def main():
            w = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
            total = w.tanh().sum()
            view = total.data
            view.zero_()
            total.backward()
            return w.grad
        """,
        # A shared layer whose detached branch is not its only path to the output.
        """
        import torch
        from torch import nn

        class Siamese(nn.Module):
            def __init__(self):
                super().__init__()
                self.shared = nn.Linear(6, 3)

            def forward(self, a, b):
                return self.shared(a) - self.shared(b).detach()
        """,
    ],
    ids=["read-only", "unedited-copy", "root-only", "shared-layer"],
)
def test_the_harmless_uses_are_left_alone(source):
    assert _codes(source) == []


@pytest.mark.parametrize("template, line", [(EDIT_ALIAS, 8), (EDIT_ALIAS_MODULE_LEVEL, 7)], ids=["function", "module"])
@pytest.mark.parametrize("cut, code", [("detach()", "DL204"), ("data", "DL101")])
def test_verify_confirms_the_edit_through_the_bound_name_on_that_code(tmp_path, template, line, cut, code):
    pytest.importorskip("torch")
    from detachlint.verify import Verifier, VerifyOptions

    path = tmp_path / "seed.py"
    path.write_text(textwrap.dedent(template.format(cut=cut)), encoding="utf-8")
    findings = [f for f in lint_source(path.read_bytes(), str(path), RULES).findings if f.code == code]
    assert [f.line for f in findings] == [line]
    verifier = Verifier(VerifyOptions(timeout=10.0))
    verifier.start([str(tmp_path)])
    try:
        (verified,) = verifier.verify(findings, lambda display: Path(display).read_text(encoding="utf-8"))
    finally:
        verifier.close()
    assert verified.verification.status == "confirmed", verified.verification.evidence
    # What the run saw on this code: the same edit through a tracked alias
    # trips autograd's version check on the `tanh` output backward saved.
    assert "modified by an inplace operation" in verified.verification.evidence
