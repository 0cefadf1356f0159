"""Roles and instances come from what the code does, not from what things
are called: the same hazard with neutral names is found the same way, and
look-alikes stay clean whatever their names."""

from __future__ import annotations

import textwrap

from detachlint.engine import lint_source
from detachlint.registry import load_rules

RULES = load_rules()


def _lines(code: str, source: str):
    result = lint_source(textwrap.dedent(source).encode(), "case.py", [RULES[code]])
    assert not result.errors
    return sorted(f.line for f in result.findings if f.code == code)


FREEZE = """\
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(4, 8)
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        feats = self.encoder(x).detach()
        return self.head(feats)


model = Model()
opt = torch.optim.Adam(model.parameters())
loss = model(torch.randn(2, 4)).sum()
loss.backward()
opt.step()
"""


def test_a_freeze_in_forward_is_found_whatever_the_instance_is_called():
    assert _lines("DL201", FREEZE) == [12]
    renamed = FREEZE.replace("self", "n1").replace("encoder", "n2").replace("head", "n3").replace("Model", "n4")
    assert _lines("DL201", renamed) == [12]


GAN = """\
import torch
from torch import nn

a = nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, 2))
b = nn.Sequential(nn.Linear(2, 6), nn.ReLU(), nn.Linear(6, 1))
o1 = torch.optim.Adam(a.parameters())
o2 = torch.optim.Adam(b.parameters())
crit = nn.BCEWithLogitsLoss()
for real in [torch.randn(4, 2)] * 3:
    z = torch.randn(4, 3)
    x = a(z) * 0.5 + 0.5
    o2.zero_grad()
    l2 = crit(b(real), torch.ones(4, 1)) + crit(b(x), torch.zeros(4, 1))
    l2.backward()
    o2.step()
    o1.zero_grad()
    l1 = crit(b(a(z)), torch.ones(4, 1))
    l1.backward()
    o1.step()
"""


def test_a_discriminator_step_is_found_by_which_optimizer_owns_what():
    # `b` is stepped alone after a backward through `a`'s live output; `a` is
    # stepped by another optimizer: the roles, whatever the names.
    assert _lines("DL602", GAN) == [13]
    fixed = GAN.replace("crit(b(x), torch.zeros", "crit(b(x.detach()), torch.zeros")
    assert _lines("DL602", fixed) == []


def test_one_optimizer_over_both_models_is_no_discriminator_step():
    """An autoencoder: the decoder runs on the encoder's live output, and the
    step updates both. Nothing is computed for nothing."""
    source = """\
    import torch
    from torch import nn

    enc, dec = nn.Linear(4, 2), nn.Linear(2, 4)
    opt = torch.optim.Adam([*enc.parameters(), *dec.parameters()])
    for x in [torch.randn(8, 4)] * 3:
        code = enc(x)
        loss = ((dec(code) - x) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    """
    assert _lines("DL602", source) == []


def test_an_actor_update_through_the_critic_is_no_discriminator_step():
    source = """\
    import torch
    from torch import nn

    actor, critic = nn.Linear(3, 1), nn.Linear(4, 1)
    actor_opt = torch.optim.Adam(actor.parameters())
    critic_opt = torch.optim.Adam(critic.parameters())
    for s in [torch.randn(5, 3)] * 3:
        q = critic(torch.cat([s, actor(s)], 1))
        loss = -q.mean()
        actor_opt.zero_grad()
        loss.backward()
        actor_opt.step()
    """
    assert _lines("DL602", source) == []
