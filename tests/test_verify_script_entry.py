"""The verifier runs the file as `python file.py` does when that is what
reaches the finding: the `__main__` block's loop trains a model whose cut
sits in a helper (DL201), a no-grad forward decorator freezes the layers of
the module that calls it, an agent that is no module steps an encoder
optimizer, and an error the program catches is still the statement's own
(DL502). A program run that stops after the line on something else gives
way to the other plans (tests/test_verify_config_values.py).

The session's one verifier worker (tests/conftest.py) serves the files.
"""

from __future__ import annotations

import pytest

from conftest import line_of, verify_findings

pytest.importorskip("torch")


LINEAR_PROBE = '''
import torch
import torch.nn.functional as F
from torch import nn


def make_backbone(width=8):
    return nn.Sequential(
        nn.Conv2d(3, width, 3, padding=1), nn.ReLU(),
        nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
    )


def embed(backbone, images):
    with torch.no_grad():
        feats = backbone(images)
    return feats.flatten(1)


if __name__ == "__main__":
    backbone = make_backbone()
    head = nn.Linear(8, 5)
    params = list(backbone.parameters()) + list(head.parameters())
    opt = torch.optim.SGD(params, lr=0.1, momentum=0.9)
    for epoch in range(3):
        images, labels = torch.randn(16, 3, 12, 12), torch.randint(0, 5, (16,))
        logits = head(embed(backbone, images))
        loss = F.cross_entropy(logits, labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
'''


def test_dl201_the_main_blocks_loop_backpropagates_past_the_helpers_cut(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "linear_probe.py", LINEAR_PROBE, "DL201")
    verification = verdicts[line_of(LINEAR_PROBE, "with torch.no_grad():")]
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    assert f"the loss backpropagated on line {line_of(LINEAR_PROBE, 'loss.backward()')}" in verification.evidence
    assert "reaches none of the 4 trainable parameters of `backbone`" in verification.evidence
    assert "run through the file's script code" in verification.evidence


ROTARY = '''
import torch
from torch import nn


class Rotary(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))

    @torch.no_grad()
    def forward(self, q, k):
        t = torch.arange(q.shape[1], dtype=torch.float32)
        angles = torch.outer(t, self.inv_freq)
        cos, sin = angles.cos().repeat(1, 2), angles.sin().repeat(1, 2)
        rotate = lambda x: torch.cat([-x[..., x.shape[-1] // 2:], x[..., : x.shape[-1] // 2]], dim=-1)
        return q * cos + rotate(q) * sin, k * cos + rotate(k) * sin


class Attention(nn.Module):
    def __init__(self, dim=16):
        super().__init__()
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.rotary = Rotary(dim)

    def forward(self, x):
        q, k = self.rotary(self.q_proj(x), self.k_proj(x))
        weights = torch.softmax(q @ k.transpose(1, 2) / q.shape[-1] ** 0.5, dim=-1)
        return weights @ self.v_proj(x)


if __name__ == "__main__":
    layer = Attention()
    opt = torch.optim.Adam(layer.parameters(), lr=1e-3)
    for _ in range(3):
        x = torch.randn(2, 6, 16)
        loss = layer(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
'''


def test_dl201_a_decorated_forward_freezes_the_callers_projections(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "rotary.py", ROTARY, "DL201")
    verification = verdicts[line_of(ROTARY, "@torch.no_grad()")]
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    # `self.q_proj` and `self.k_proj` are the caller's (`Attention`), read in its frame.
    assert "reaches none of the 4 trainable parameters of `self.k_proj`, `self.q_proj`" in verification.evidence


AGENT = '''
import torch
import torch.nn.functional as F
from torch import nn


class Encoder(nn.Module):
    def __init__(self, obs_dim=10, feat=16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, feat), nn.ReLU())

    def forward(self, obs):
        return self.net(obs)


class Critic(nn.Module):
    def __init__(self, feat=16, actions=3):
        super().__init__()
        self.q = nn.Linear(feat + actions, 1)

    def forward(self, feat, action):
        return self.q(torch.cat([feat, action], dim=-1))


class Agent:
    def __init__(self, obs_dim=10, actions=3, lr=1e-3):
        self.encoder = Encoder(obs_dim)
        self.critic = Critic(actions=actions)
        self.encoder_opt = torch.optim.Adam(self.encoder.parameters(), lr=lr)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=lr)

    def update_critic(self, feat, action, target):
        loss = F.mse_loss(self.critic(feat, action), target)
        self.encoder_opt.zero_grad()
        self.critic_opt.zero_grad()
        loss.backward()
        self.critic_opt.step()
        self.encoder_opt.step()
        return loss.item()

    def encode(self, obs):
        return self.encoder(obs)

    def update(self, obs, action, target):
        with torch.no_grad():
            feat = self.encode(obs)
        return self.update_critic(feat, action, target)


if __name__ == "__main__":
    agent = Agent()
    for _ in range(3):
        obs, action, target = torch.randn(32, 10), torch.randn(32, 3), torch.randn(32, 1)
        agent.update(obs, action, target)
'''


def test_dl201_an_agent_that_is_no_module_is_judged_by_the_optimizer_it_steps(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "agent.py", AGENT, "DL201")
    verification = verdicts[line_of(AGENT, "with torch.no_grad():")]
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    assert "reaches none of the 2 trainable parameters `self.encoder_opt` steps (`self` is no module: `Agent`)" in verification.evidence


PRIORS = '''
import math

import torch
from torch import nn


class Detector(nn.Module):
    def __init__(self, channels=8, anchors=3, classes=4):
        super().__init__()
        self.anchors, self.classes = anchors, classes
        self.backbone = nn.Conv2d(3, channels, 3, padding=1)
        self.heads = nn.ModuleList(nn.Conv2d(channels, anchors * (classes + 5), 1) for _ in range(2))
        self.init_priors()

    def init_priors(self, prior=0.01):
        for head in self.heads:
            b = head.bias.view(self.anchors, -1)
            b[:, 4] += math.log(prior / (1 - prior))

    def forward(self, x):
        feats = torch.relu(self.backbone(x))
        return [head(feats) for head in self.heads]


if __name__ == "__main__":
    try:
        model = Detector()
    except RuntimeError as error:
        print("could not build the detector:", error)
        model = None
'''


def test_dl502_an_error_the_program_catches_is_still_the_statements(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "priors.py", PRIORS, "DL502")
    verification = verdicts[line_of(PRIORS, "b[:, 4] +=")]
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    assert "a view of a leaf Variable that requires grad is being used in an in-place operation" in verification.evidence
    assert "(the program caught it and went on)" in verification.evidence


BAG_OF_WORDS = '''
import numpy as np
import torch
from torch import nn


class ContextBag(nn.Module):
    def __init__(self, vocab=20, dim=6):
        super().__init__()
        self.context = nn.Embedding(vocab, dim)
        self.center = nn.Embedding(vocab, dim)

    def forward(self, windows, centers):
        bags = []
        for window in windows:
            rows = self.context(torch.LongTensor(window))
            bags.append(np.sum(rows.data.numpy(), axis=0).tolist())
        bags = torch.FloatTensor(bags)
        return -torch.nn.functional.logsigmoid((bags * self.center(torch.LongTensor(centers))).sum(1)).mean()


if __name__ == "__main__":
    model = ContextBag()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        windows = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
        optimizer.zero_grad()
        loss = model(windows, [2, 5, 8])
        loss.backward()
        optimizer.step()
'''


def test_dl201_a_forward_only_the_script_can_feed_is_judged_on_its_own_backward(verifier, tmp_path):
    # Lists of index windows: no synthesized input fits `forward`; the script's run does.
    verdicts = verify_findings(verifier, tmp_path, "bag.py", BAG_OF_WORDS, "DL201")
    verification = verdicts[line_of(BAG_OF_WORDS, "rows.data.numpy()")]
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    assert "`context.weight`: requires_grad=True, grad None after backward; `center.weight` did get gradients" in verification.evidence
    assert "run through the file's script code" in verification.evidence
