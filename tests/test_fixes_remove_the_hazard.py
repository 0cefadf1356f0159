"""A fix must remove the hazard, not only the finding: each file below is
fixed with `--fix --unsafe-fixes`, then run with torch, and what made the
finding true must be gone (a graph still attached, an IndexError)."""

from __future__ import annotations

import runpy
import textwrap

import pytest

from conftest import run_cli

torch = pytest.importorskip("torch")


def _fixed(tmp_path, name: str, source: str, *codes: str) -> dict:
    """The file's namespace after `--fix --unsafe-fixes` of `codes`, run as a module."""
    path = tmp_path / name
    path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
    done = run_cli("check", name, "--fix", "--unsafe-fixes", "--select", ",".join(codes), "--exit-zero", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return runpy.run_path(str(path))


TRUNCATED_BPTT = """
import torch
from torch import nn


class Tagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 8, batch_first=True)
        self.out = nn.Linear(8, 3)

    def forward(self, x, state):
        y, state = self.rnn(x, state)
        return self.out(y), state


def train_chunks(model, optimizer, chunks, state=None):
    for x, y in chunks:
        logits, state = model(x, state)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten())
        optimizer.zero_grad()
        loss.backward(retain_graph=True)
        optimizer.step()
        for s in state:
            s.detach()
    return state
"""


def test_dl206_a_loop_variable_is_detached_in_place_not_rebound(tmp_path):
    namespace = _fixed(tmp_path, "bptt.py", TRUNCATED_BPTT, "DL206")
    model = namespace["Tagger"]()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    chunks = [(torch.randn(2, 5, 4), torch.randint(0, 3, (2, 5))) for _ in range(2)]
    state = namespace["train_chunks"](model, optimizer, chunks)
    # The carried state no longer holds the last chunk's graph.
    assert all(s.grad_fn is None and not s.requires_grad for s in state)


VAE_LOG = """
import torch
import torch.nn.functional as F


def vae_log(recon, x, mu, logvar):
    bce = F.binary_cross_entropy(recon, x, reduction="sum")
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    loss = bce + kld
    loss.backward()
    return "loss %.3f bce %.3f kld %.3f" % (loss.data[0], bce.data[0], kld.data[0])
"""


def test_dl103_every_scalar_index_on_the_line_is_fixed(tmp_path):
    namespace = _fixed(tmp_path, "vae_log.py", VAE_LOG, "DL103")
    mu = torch.randn(2, 3, requires_grad=True)
    logvar = torch.randn(2, 3, requires_grad=True)
    recon = torch.rand(2, 3, requires_grad=True)
    line = namespace["vae_log"](recon, torch.rand(2, 3), mu, logvar)  # raised IndexError before the fix
    assert line.startswith("loss ")
