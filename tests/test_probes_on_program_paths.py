"""Probes run on the code the program runs: a dead loss term computed in a
loss class the training step is handed (DL201), a generator step that judges
a detached fake (DL202), a state object with its own `detach()` (DL206), a
method that only reaches its line after the file's loop has called it many
times (DL206), a module that turns autograd off on import (DL302), per-key
loss totals (DL401), a history the file's own loop fills (DL402), a clone
made a leaf by `requires_grad_` (DL501) and a test method that needs the
script's setup calls first (DL304). Each verdict rests on the user's code.

The session's one verifier worker (tests/conftest.py) serves the file.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from conftest import line_of, verify_findings
from detachlint.engine import lint_source
from detachlint.registry import load_rules

pytest.importorskip("torch")  # the verifier's extra; CI installs it with [dev]


# A cage network whose helper detaches the weights a loss class then
# regularises, and a vocoder whose frozen speaker encoder works under `no_grad`.
DEAD_TERMS = (Path(__file__).resolve().parent.parent / "fixtures" / "DL201" / "pos_dead_term_through_loss_class.py").read_text(encoding="utf-8")


@pytest.mark.parametrize("cut, term", [
    ("weights = weights.detach()", "F.relu(-weights).sum()"),
    ("with torch.no_grad():", "loss_spk = -F.cosine_similarity("),
])
def test_dl201_a_dead_term_computed_where_the_loss_is_backpropagated(verifier, tmp_path, cut, term):
    verdicts = verify_findings(verifier, tmp_path, "dead_terms.py", DEAD_TERMS, "DL201")
    verification = verdicts[line_of(DEAD_TERMS, cut)]
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    line = line_of(DEAD_TERMS, term)
    assert f"(line {line}) was computed with requires_grad=False, grad_fn=None" in verification.evidence


JUDGED_FAKE = '''
import torch
import torch.nn.functional as F
from torch import nn


class Painter(nn.Module):
    def __init__(self, latent=8):
        super().__init__()
        self.latent = latent
        self.gen = nn.Sequential(nn.Linear(latent, 16), nn.ReLU(), nn.Linear(16, 12))
        self.critic = nn.Sequential(nn.Linear(12, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))

    def training_step(self, batch, batch_idx, optimizer_idx):
        real = batch
        fake = self.gen(torch.randn(real.shape[0], self.latent))
        if optimizer_idx == 0:
            judged = self.critic(fake.detach())
            return F.binary_cross_entropy_with_logits(judged, torch.ones_like(judged))
        real_loss = F.binary_cross_entropy_with_logits(self.critic(real), torch.ones(real.shape[0], 1))
        fake_loss = F.binary_cross_entropy_with_logits(self.critic(fake.detach()), torch.zeros(real.shape[0], 1))
        return real_loss + fake_loss

    def configure_optimizers(self):
        gen_optim = torch.optim.Adam(self.gen.parameters(), lr=2e-4)
        critic_optim = torch.optim.Adam(self.critic.parameters(), lr=4e-4)
        return [gen_optim, critic_optim], []


if __name__ == "__main__":
    painter = Painter()
    loss = painter.training_step(torch.randn(4, 12), 0, 0)
'''


def test_dl202_a_judged_detached_fake_reaches_no_generator_parameter(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "painter.py", JUDGED_FAKE, "DL202")
    verification = verdicts[line_of(JUDGED_FAKE, "judged = self.critic(fake.detach())")]
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    assert "reaches none of the 4 trainable parameters of `self.gen`" in verification.evidence


STATE_OBJECT = '''
import torch
from torch import nn


class CellState:
    def __init__(self, h, c):
        self.h, self.c = h, c

    def detach(self):
        self.h = self.h.detach()
        self.c = self.c.detach()


class Tagger(nn.Module):
    def __init__(self, vocab=20, hidden=8, tags=4):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.cell = nn.LSTMCell(hidden, hidden)
        self.out = nn.Linear(hidden, tags)

    def forward(self, tokens, state):
        h, c = self.cell(self.embed(tokens), (state.h, state.c))
        return self.out(h), CellState(h, c)


def train_stream(model, optimizer, stream):
    state = CellState(torch.zeros(2, 8), torch.zeros(2, 8))
    for tokens, tags in stream:
        scores, state = model(tokens, state)
        loss = nn.functional.cross_entropy(scores, tags)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        state.detach()


if __name__ == "__main__":
    model = Tagger()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    stream = [(torch.randint(0, 20, (2,)), torch.randint(0, 4, (2,))) for _ in range(3)]
    train_stream(model, optimizer, stream)
'''


def test_dl206_leaves_a_state_object_whose_own_detach_works_in_place():
    # The rule no longer flags it (the file's class defines `detach()`); the
    # probe's refutation of such a call was what showed the claim false.
    source = textwrap.dedent(STATE_OBJECT).lstrip("\n")
    findings = lint_source(source.encode(), "tagger.py", [load_rules()["DL206"]]).findings
    assert line_of(STATE_OBJECT, "        state.detach()") not in [f.line for f in findings]


BUFFERED_AGENT = '''
import random

import torch
import torch.nn.functional as F
from torch import nn


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 16), nn.ReLU(), nn.Linear(16, 2))

    def forward(self, x):
        return self.net(x)


class Agent:
    def __init__(self, batch_size=8):
        self.batch_size = batch_size
        self.memory = []
        self.critic = Critic()
        self.critic_target = Critic()
        self.optimizer = torch.optim.Adam(self.critic.parameters(), lr=1e-3)

    def update(self, state, action, reward, next_state):
        self.memory.append((state, action, reward, next_state))
        if len(self.memory) < self.batch_size:
            return
        batch = random.sample(self.memory, self.batch_size)
        states = torch.stack([b[0] for b in batch])
        actions = torch.tensor([b[1] for b in batch])
        rewards = torch.tensor([b[2] for b in batch])
        next_states = torch.stack([b[3] for b in batch])
        q = self.critic(states).gather(1, actions.unsqueeze(1)).squeeze(1)
        next_q = self.critic_target(next_states).max(1)[0]
        next_q.detach()
        loss = F.mse_loss(q, rewards + 0.9 * next_q)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()


def run(steps=20):
    agent = Agent()
    state = torch.zeros(3)
    for step in range(steps):
        next_state = torch.randn(3)
        agent.update(state, step % 2, 1.0, next_state)
        state = next_state
    return agent


if __name__ == "__main__":
    run(steps=20)
'''


def test_dl206_a_method_the_files_loop_calls_runs_through_that_loop(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "agent.py", BUFFERED_AGENT, "DL206")
    verification = verdicts[line_of(BUFFERED_AGENT, "next_q.detach()")]
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    assert "`next_q` still had grad_fn=MaxBackward0" in verification.evidence


GRAD_OFF_ON_IMPORT = '''
import torch
import torch.nn.functional as F
from torch import nn

torch.set_grad_enabled(False)


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)


def fit(model, x, y, steps=3):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        loss = F.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model


if __name__ == "__main__":
    fit(Regressor(), torch.randn(8, 4), torch.randn(8, 1))
'''


def test_dl302_a_module_that_turns_autograd_off_on_import_is_the_programs_state(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "regress.py", GRAD_OFF_ON_IMPORT, "DL302")
    verification = verdicts[line_of(GRAD_OFF_ON_IMPORT, "loss.backward()")]
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    assert "leaves it from import on" in verification.evidence


PER_KEY_TOTALS = '''
from collections import defaultdict

import torch
import torch.nn.functional as F
from torch import nn


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(6, 16), nn.ReLU())
        self.box = nn.Linear(16, 4)
        self.cls = nn.Linear(16, 3)

    def forward(self, x):
        h = self.body(x)
        return self.box(h), self.cls(h)


def train_epoch(model, optimizer, batches):
    totals = defaultdict(lambda: torch.tensor(0.0))
    for x, boxes, labels in batches:
        box, cls = model(x)
        parts = {"box": F.l1_loss(box, boxes), "cls": F.cross_entropy(cls, labels)}
        loss = parts["box"] + parts["cls"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        for name, value in parts.items():
            totals[name] += value
    return totals


if __name__ == "__main__":
    model = Detector()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = [(torch.randn(4, 6), torch.randn(4, 4), torch.randint(0, 3, (4,))) for _ in range(3)]
    train_epoch(model, optimizer, batches)
'''


def test_dl401_per_key_totals_grow_entry_by_entry(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "totals.py", PER_KEY_TOTALS, "DL401")
    verification = verdicts[line_of(PER_KEY_TOTALS, "totals[name] += value")]
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    assert "(the entry for 'box') after iterations 1-3" in verification.evidence


HISTORY = '''
import numpy as np
import torch
from torch import nn


class Learner:
    def __init__(self, features=4):
        self.net = nn.Linear(features, 1)
        self.optimizer = torch.optim.SGD(self.net.parameters(), lr=0.01)
        self.loss_history = []

    def learn(self, x, y):
        loss = nn.functional.mse_loss(self.net(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.loss_history.append(loss)

    def curve(self):
        return np.asarray(self.loss_history)


def practice(learner, rounds=3):
    for _ in range(rounds):
        learner.learn(torch.randn(8, 4), torch.randn(8, 1))


if __name__ == "__main__":
    learner = Learner()
    practice(learner)
    learner.curve()
'''


def test_dl402_a_history_the_files_own_loop_fills(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "history.py", HISTORY, "DL402")
    verification = verdicts[line_of(HISTORY, "return np.asarray(self.loss_history)")]
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    assert "Can't call numpy() on Tensor that requires grad" in verification.evidence


PROMPTS = '''
import torch
from torch import nn


class PromptTuner(nn.Module):
    def __init__(self, n_prompts=3, dim=8):
        super().__init__()
        self.encoder = nn.Linear(dim, dim)
        base = self.encoder(torch.randn(1, n_prompts, dim))
        self.prompts = []
        for i in range(n_prompts):
            prompt = base[:, i:i + 1].clone()
            prompt.requires_grad_(True)
            self.prompts.append(prompt)

    def configure_optimizers(self):
        return torch.optim.Adam(self.prompts, lr=0.1)


if __name__ == "__main__":
    tuner = PromptTuner(3, 8)
'''


def test_dl501_a_clone_given_requires_grad_by_a_statement_stays_a_non_leaf(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "prompts.py", PROMPTS, "DL501")
    verification = verdicts[line_of(PROMPTS, "prompt.requires_grad_(True)")]
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    assert "`prompt`: is_leaf=False" in verification.evidence


PIPELINE = '''
from types import SimpleNamespace

import torch
from torch import nn


class Smoother(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, y):
        return self.fc(y)


class Pipeline:
    def __init__(self, name):
        self.name = name

    def set_model(self, model):
        self.model = model

    def set_params(self, args):
        self.steps = args.steps
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=args.lr)

    def train(self, data, target):
        for _ in range(self.steps):
            loss = nn.functional.mse_loss(self.model(data), target)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        self.best_model = self.model
        return loss.item()

    def test(self, data, target):
        self.model = self.best_model
        self.n_test = data.shape[0]
        self.errors = torch.zeros(self.n_test)
        self.model.eval()
        torch.no_grad()
        out = self.model(data)
        for j in range(self.n_test):
            self.errors[j] = nn.functional.mse_loss(out[j], target[j]).item()
        return out


if __name__ == "__main__":
    data, target = torch.randn(6, 2), torch.randn(6, 2)
    args = SimpleNamespace(steps=2, lr=1e-3)
    pipeline = Pipeline("smooth")
    pipeline.set_model(Smoother())
    pipeline.set_params(args)
    final = pipeline.train(data, target)
    pipeline.test(data, target)
'''


def test_dl304_a_method_runs_after_the_scripts_setup_calls(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "pipeline.py", PIPELINE, "DL304")
    verification = verdicts[line_of(PIPELINE, "        torch.no_grad()")]
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    assert verification.evidence == "autograd was still on right after `torch.no_grad()`"
