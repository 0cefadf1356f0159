"""Verdicts on shapes the probes used to misread: a cut term inside a sum
(DL202), a nested list of tensors copied into a new leaf (DL505), a
discriminator's backward that runs into a generator graph already freed
(DL602), a no-grad helper that runs no trainable module (DL303, a
look-alike) and a module-level edit whose backward sits in the `__main__`
block's `try` (DL204).

The session's one verifier worker (tests/conftest.py) serves the files.
"""

from __future__ import annotations

import pytest

from conftest import line_of, verify_findings

pytest.importorskip("torch")


ADVERSARIAL = """
import torch
import torch.nn.functional as F
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 4))

    def forward(self, x):
        return self.body(x)


def attack(model, clean, target, steps=3, eps=0.1):
    delta = torch.zeros_like(clean, requires_grad=True)
    for _ in range(steps):
        out = model(clean + delta)
        feature_loss = F.mse_loss(model.body[0](clean + delta), model.body[0](clean))
        loss = F.mse_loss(out, target)
        loss = loss + feature_loss.detach().item()
        loss.backward()
        with torch.no_grad():
            delta += eps * delta.grad.sign()
            delta.grad.zero_()
    return delta


if __name__ == "__main__":
    attack(Encoder(), torch.randn(4, 6), torch.randn(4, 4))
"""


def test_dl202_reads_the_cut_term_not_the_sum(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "attack.py", ADVERSARIAL, "DL202")
    verification = verdicts[line_of(ADVERSARIAL, "loss = loss + feature_loss")]
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    assert verification.evidence.startswith("`feature_loss.detach().item()`: requires_grad=False")


ROTATION = """
import torch
from torch import nn


class AngleNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x).squeeze()


def rotation_matrix(theta):
    R = torch.tensor([[torch.cos(theta), -torch.sin(theta)],
                      [torch.sin(theta), torch.cos(theta)]], requires_grad=True)
    return R


def train(model, x, points, target, optimizer):
    theta = model(x)
    loss = ((rotation_matrix(theta) @ points - target) ** 2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()


if __name__ == "__main__":
    net = AngleNet()
    train(net, torch.randn(4), torch.randn(2, 5), torch.randn(2, 5), torch.optim.SGD(net.parameters(), lr=0.1))
"""


def test_dl505_a_nested_list_of_tensors_copied_into_a_new_leaf(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "rotation.py", ROTATION, "DL505")
    verification = verdicts[line_of(ROTATION, "R = torch.tensor(")]
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    assert "grad_fn=CosBackward0" in verification.evidence and "new leaf" in verification.evidence


GENERATOR_FIRST = """
import torch
from torch import nn


class G(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4), nn.Tanh())

    def forward(self, z):
        return self.net(z)


class D(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1), nn.Sigmoid())

    def forward(self, x):
        return self.net(x).view(-1)


def train_step(netG, netD, real, optG, optD, criterion):
    fake_batch = netG(torch.randn(real.size(0), 8))
    optG.zero_grad()
    g_loss = criterion(netD(fake_batch), torch.ones(real.size(0)))
    g_loss.backward()
    optG.step()
    optD.zero_grad()
    d_loss = criterion(netD(real), torch.ones(real.size(0))) + criterion(netD(fake_batch), torch.zeros(real.size(0)))
    d_loss.backward()
    optD.step()


if __name__ == "__main__":
    netG, netD = G(), D()
    optG = torch.optim.Adam(netG.parameters(), lr=1e-3)
    optD = torch.optim.Adam(netD.parameters(), lr=1e-3)
    train_step(netG, netD, torch.rand(6, 4), optG, optD, nn.BCELoss())
"""


def test_dl602_a_discriminator_backward_into_the_freed_generator_graph(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "generator_first.py", GENERATOR_FIRST, "DL602")
    verification = verdicts[line_of(GENERATOR_FIRST, "criterion(netD(fake_batch), torch.zeros")]
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    assert "into the generator's graph, which an earlier backward had freed" in verification.evidence


DISTANCE_WEIGHTS = """
import numpy as np
import torch
from torch import nn


class WeightedLoss(nn.Module):
    @torch.no_grad()
    def field(self, img):
        return np.abs(img - img.mean(axis=(1, 2, 3), keepdims=True))

    def forward(self, pred, target):
        pred_dt = torch.from_numpy(self.field(pred.detach().numpy())).float()
        return (((pred - target) ** 2) * (1 + pred_dt)).mean()


class TinySeg(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 1, 3, padding=1))

    def forward(self, x):
        return torch.sigmoid(self.body(x))


def fit(net, loss_fn, optimizer, data, target, steps=3):
    for _ in range(steps):
        optimizer.zero_grad()
        l = loss_fn(net(data), target)
        l.backward()
        optimizer.step()


if __name__ == "__main__":
    net = TinySeg()
    fit(net, WeightedLoss(), torch.optim.SGD(net.parameters(), lr=0.1), torch.rand(2, 1, 8, 8), torch.rand(2, 1, 8, 8))
"""


def test_dl303_a_no_grad_helper_without_trainable_modules_is_not_confirmed(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "weights.py", DISTANCE_WEIGHTS, "DL303")
    assert verdicts, "DL303 flags the no-grad helper (the look-alike the probe must not confirm)"
    for verification in verdicts.values():
        assert verification.status != "confirmed", verification.evidence


SNIPPET = """
import torch

a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
out = a.sigmoid()
c = out.detach()
c.zero_()
print(c, out)

if __name__ == "__main__":
    try:
        out.sum().backward()
    except RuntimeError as error:
        print("backward raised:", error)
"""


def test_dl204_the_main_blocks_try_holds_the_backward(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "snippet.py", SNIPPET, "DL204")
    verification = verdicts[line_of(SNIPPET, "c.zero_()")]
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    assert "the backward after it raised RuntimeError: one of the variables needed for gradient computation" in verification.evidence
