"""The probe of DL302 on a loss a helper forces to require grad: the
backward runs without raising, from a new leaf, and trains nothing. The
finding says so, and the probe reads the tensor the backward starts from.

The session's one verifier worker (tests/conftest.py) serves the file.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from detachlint.engine import lint_source
from detachlint.registry import load_rules

pytest.importorskip("torch")  # the verifier's extra; CI installs it with [dev]

RULES = load_rules()

FORCED = '''
import torch
import torch.nn.functional as F
from torch import nn


class Fitter(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))

    def forward(self, coords):
        return self.net(coords)


class Predictor:
    def setup(self):
        self.model = Fitter()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-2)

    def fit_step(self, coords, target):
        loss = F.mse_loss(self.model(coords), target)
        if not loss.requires_grad:
            loss.requires_grad_(True)
        return loss

    @torch.inference_mode()
    def predict(self, coords, target, steps=5):
        for _ in range(steps):
            self.optimizer.zero_grad()
            loss = self.fit_step(coords, target)
            loss.backward()
            self.optimizer.step()
        return self.model(coords)


if __name__ == "__main__":
    predictor = Predictor()
    predictor.setup()
    coords = torch.randn(32, 3)
    predictor.predict(coords, coords.sum(dim=1, keepdim=True))
'''


def test_a_loss_forced_to_require_grad_under_inference_mode_reaches_no_parameter(verifier, tmp_path):
    path = tmp_path / "predictor.py"
    path.write_text(textwrap.dedent(FORCED).lstrip("\n"), encoding="utf-8")
    findings = lint_source(path.read_bytes(), str(path), [RULES["DL302"]]).findings
    assert [(f.line, f.message.split(":")[0]) for f in findings] == [(31, "`loss.backward()` reaches no parameter, so nothing trains")]
    assert "`fit_step` forces it to require grad (line 23)" in findings[0].message
    (verified,) = verifier.verify(findings, lambda display: Path(display).read_text(encoding="utf-8"))
    verification = verified.verification
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification
    assert "from a leaf (is_leaf=True, grad_fn=None): its graph reaches no parameter" in verification.evidence


WRAPPED_AFTER_DEFINITION = '''
import torch
import torch.nn.functional as F
from torch import nn


def train_step(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
    return loss.item()


train_step = torch.no_grad()(train_step)


def fit(model, batches):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in batches:
        train_step(model, optimizer, x, y)


fit(nn.Linear(4, 1), [(torch.randn(8, 4), torch.randn(8, 1))])
'''


def test_a_step_rebound_under_no_grad_is_run_rebound(verifier, tmp_path):
    """The reproduction carries `train_step = torch.no_grad()(train_step)`:
    without it, the run would call the plain function and refute a true finding."""
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(WRAPPED_AFTER_DEFINITION).lstrip("\n"), encoding="utf-8")
    findings = lint_source(path.read_bytes(), str(path), [RULES["DL302"]]).findings
    assert [f.line for f in findings] == [9]
    (verified,) = verifier.verify(findings, lambda display: Path(display).read_text(encoding="utf-8"))
    verification = verified.verification
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification
    assert "element 0 of tensors does not require grad" in verification.evidence
