"""Severity by harm: each rule's harm gives its severity, and a finding that
does less harm than its rule's worst carries its own."""

from __future__ import annotations

import textwrap

from detachlint.engine import lint_source
from detachlint.registry import load_rules
from detachlint.rule import HARMS

RULES = load_rules()


def _findings(code: str, source: str):
    return lint_source(textwrap.dedent(source).encode(), "x.py", [RULES[code]]).findings


def test_every_rule_names_a_harm_and_its_severity_follows():
    for code, rule in RULES.items():
        assert rule.harm in HARMS, code
        assert rule.severity == HARMS[rule.harm], code


def test_a_certain_index_error_is_an_error():
    (finding,) = _findings("DL103", """
        import torch.nn.functional as F

        def step(model, x, y, optimizer):
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            print(loss.data[0])
    """)
    assert finding.severity == "error" and "invalid index of a 0-dim tensor" in finding.message


def test_a_gan_pass_that_is_only_wasted_is_a_warning():
    source = """
        import torch
        from torch import nn

        class Trainer:
            def __init__(self, G: nn.Module, D: nn.Module):
                self.G, self.D = G, D
                self.g_optimizer = torch.optim.Adam(self.G.parameters())
                self.d_optimizer = torch.optim.Adam(self.D.parameters())

            def train_step(self, real, z):
                fake = self.G(z)
                d_loss = torch.relu(1.0 - self.D(real)).mean() + torch.relu(1.0 + self.D(fake)).mean()
                self.d_optimizer.zero_grad()
                d_loss.backward()
                self.d_optimizer.step()
                g_loss = -self.D(self.G(z)).mean()
                self.g_optimizer.zero_grad()
                g_loss.backward()
                self.g_optimizer.step()
    """
    (finding,) = _findings("DL602", source)
    assert "runs a second backward pass" in finding.message
    assert finding.severity == "warning"
