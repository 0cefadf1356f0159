"""The verifier runs a finding where the program runs it: a `.data` edit in an
update method whose policy network only the file's own call builds (DL101),
a test step the file's trainer calls under `inference_mode()` (DL302), and a
value that is an output object, not a tensor (DL303). A verdict rests on
what one run showed, never on one attempt's value and another's backward.

The session's one verifier worker (tests/conftest.py) serves the files.
"""

from __future__ import annotations

import pytest

from conftest import line_of, verify_findings

pytest.importorskip("torch")  # the verifier's extra; CI installs it with [dev]


# The policy lives on a plain object (not a module) that the script builds;
# the clamp on `.data` hides itself from autograd, so backward divides by
# the clamped values.
CLAMPED_UPDATE = '''
import torch
import torch.nn.functional as F
from torch import nn


class PolicyNet(nn.Module):
    def __init__(self, obs=6, actions=3, temperature=0.05):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(obs, 32), nn.Tanh(), nn.Linear(32, actions))
        self.temperature = temperature

    def forward(self, x):
        return F.softmax(self.body(x) / self.temperature, dim=-1)


class Reinforce:
    def __init__(self, policy, lr=1e-2):
        self.policy = policy
        self.optimizer = torch.optim.SGD(policy.parameters(), lr=lr)

    def update(self, states, actions, returns):
        probs = self.policy(states).gather(1, actions.unsqueeze(1)).squeeze(1)
        probs.data.clamp_(0.05, 0.95)
        loss = -(torch.log(probs) * returns).mean()
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss


if __name__ == "__main__":
    torch.manual_seed(0)
    agent = Reinforce(PolicyNet())
    states = torch.randn(16, 6) * 5.0
    actions = torch.randint(0, 3, (16,))
    returns = torch.randn(16)
    agent.update(states, actions, returns)
'''


def test_dl101_gradients_of_the_policy_the_files_own_call_built(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "reinforce.py", CLAMPED_UPDATE, "DL101")
    verification = verdicts[line_of(CLAMPED_UPDATE, "probs.data.clamp_(0.05, 0.95)")]
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    assert "gradients differ from the edit made visible to autograd" in verification.evidence
    assert "`self.policy.body." in verification.evidence


# A Lightning-style loop: `Trainer.test` runs the model's `test_step` under
# `inference_mode()`, where `enable_grad()` records nothing.
INPUT_SALIENCY = '''
import torch
from torch import nn


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, x):
        return self.net(x)

    def test_step(self, batch, batch_idx):
        x, y = batch
        with torch.enable_grad():
            x = x.clone().requires_grad_(True)
            score = self(x).sum()
            saliency = torch.autograd.grad(score, x)[0]
        return saliency.abs().mean().item()


class Runner:
    def test(self, model, batches):
        model.eval()
        with torch.inference_mode():
            return [model.test_step(batch, i) for i, batch in enumerate(batches)]


if __name__ == "__main__":
    model = Regressor()
    batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(2)]
    runner = Runner()
    runner.test(model, batches)
'''


def test_dl302_a_step_the_files_runner_calls_on_its_argument(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "saliency.py", INPUT_SALIENCY, "DL302")
    verification = verdicts[line_of(INPUT_SALIENCY, "torch.autograd.grad(score, x)")]
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    assert "does not require grad" in verification.evidence


# An encoder whose queries go through a `no_grad` generation API returning an
# output object; the script trains through it once.
GENERATED_QUERIES = '''
from types import SimpleNamespace

import torch
import torch.nn.functional as F
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab=30, hidden=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, ids):
        return torch.tanh(self.proj(self.embed(ids)))

    @torch.no_grad()
    def generate(self, ids, steps=2):
        states = []
        for _ in range(steps):
            h = self(ids)
            states.append(h)
            ids = torch.cat([ids, self.head(h[:, -1]).argmax(-1, keepdim=True)], dim=1)
        return SimpleNamespace(sequences=ids, hidden_states=tuple(states))


class Retriever(nn.Module):
    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def embed(self, ids):
        outputs = self.lm.generate(ids, steps=2)
        return F.normalize(outputs.hidden_states[-1][:, -1], dim=-1)

    def forward(self, queries, passages):
        scores = self.embed(queries) @ self.embed(passages).T / 0.05
        return F.cross_entropy(scores, torch.arange(scores.size(0)))


def fit(model, pairs):
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for queries, passages in pairs:
        loss = model(queries, passages)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    pairs = [(torch.randint(0, 30, (4, 5)), torch.randint(0, 30, (4, 5))) for _ in range(2)]
    fit(Retriever(TinyLM()), pairs)
'''


def test_dl303_an_output_object_from_a_no_grad_api(verifier, tmp_path):
    verdicts = verify_findings(verifier, tmp_path, "retriever.py", GENERATED_QUERIES, "DL303")
    verification = verdicts[line_of(GENERATED_QUERIES, "outputs = self.lm.generate(ids, steps=2)")]
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    assert "floating tensor(s) in `outputs`: requires_grad=False, grad_fn=None" in verification.evidence
    assert "does not require grad" in verification.evidence


# Two encoders: the script trains the one that does not generate first. Only
# a run with the `if` forced reaches the generation and its backward; the
# verdict must say so, not borrow a later, clean run's basis.
TWO_ENCODERS = '''
import torch
import torch.nn.functional as F
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab=30, hidden=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, ids):
        return torch.tanh(self.proj(self.embed(ids)))

    @torch.no_grad()
    def generate(self, ids):
        return self(ids)


class Encoder(nn.Module):
    def __init__(self, lm, use_generate=False):
        super().__init__()
        self.lm = lm
        self.use_generate = use_generate

    def encode(self, ids):
        if not self.use_generate:
            outputs = self.lm(ids)
            reps = outputs[:, -1]
        else:
            generated = self.lm.generate(ids)
            reps = generated[:, -1]
        return F.normalize(reps, dim=-1)

    def forward(self, queries, passages):
        scores = self.encode(queries) @ self.encode(passages).T / 0.05
        return F.cross_entropy(scores, torch.arange(scores.size(0)))


def fit(model, pairs):
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    for queries, passages in pairs:
        loss = model(queries, passages)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    pairs = [(torch.randint(0, 30, (4, 5)), torch.randint(0, 30, (4, 5))) for _ in range(2)]
    plain = Encoder(TinyLM())
    fit(plain, pairs)
    generating = Encoder(TinyLM(), use_generate=True)
    fit(generating, pairs)
'''


def test_dl303_the_files_call_that_takes_the_branch_confirms_without_forcing_it(verifier, tmp_path):
    # The first call (`fit(plain, ...)`) never reaches the line; the file's
    # second call does, and its own backward raises. Nothing is forced, and a
    # backward seen in another attempt is not credited (the attempts are kept apart).
    verdicts = verify_findings(verifier, tmp_path, "two_encoders.py", TWO_ENCODERS, "DL303")
    verification = verdicts[line_of(TWO_ENCODERS, "generated = self.lm.generate(ids)")]
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification
    assert "run through the file's call `fit(generating, pairs)`" in verification.evidence
    assert "forced" not in verification.evidence
