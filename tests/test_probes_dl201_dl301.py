"""The probes of the headline freeze and evaluation rules against real torch:
DL201 (a cut leaves layers meant to train without gradients: a parameter
read through `.data` in `forward`, a helper stepping an optimizer whose
module's output it is handed detached, a loss term with no graph or one that
misses the stepped module) and DL301 (evaluation with autograd on, through
`model.forward(x)` and through a method of the model). Each kind is
confirmed on the user's own code; look-alikes the linter flags are refuted
by what the run shows.

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

# A hand-written linear layer that reads its parameters through `.data`.
CUSTOM_LINEAR = '''
import torch
from torch import nn


class MyLinear(nn.Module):
    def __init__(self, in_units, units):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_units, units))
        self.bias = nn.Parameter(torch.randn(units))

    def forward(self, X):
        linear = torch.matmul(X, self.weight.data) + self.bias.data
        return torch.relu(linear)


if __name__ == "__main__":
    layer = MyLinear(5, 3)
    print(layer(torch.rand(2, 5)))
'''

# An agent whose critic update steps the encoder's optimizer on detached features.
AGENT = '''
import torch
import torch.nn.functional as F
from torch import nn


class Agent:
    def __init__(self, obs_dim: int = 12, action_dim: int = 4, feature_dim: int = 32):
        self.encoder = nn.Sequential(nn.Linear(obs_dim, feature_dim), nn.LayerNorm(feature_dim), nn.Tanh())
        self.critic = nn.Sequential(nn.Linear(feature_dim + action_dim, 64), nn.ReLU(), nn.Linear(64, 1))
        self.encoder_opt = torch.optim.Adam(self.encoder.parameters(), lr=1e-4)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=1e-4)

    def update_critic(self, obs, action, target_q):
        q = self.critic(torch.cat([obs, action], dim=-1))
        loss = F.mse_loss(q, target_q)
        self.encoder_opt.zero_grad()
        self.critic_opt.zero_grad()
        loss.backward()
        self.critic_opt.step()
        self.encoder_opt.step()
        return loss.item()

    def update(self, obs, action, target_q):
        obs = self.encoder(obs)
        return self.update_critic(obs.detach(), action, target_q)


if __name__ == "__main__":
    agent = Agent()
    for _ in range(3):
        agent.update(torch.randn(8, 12), torch.randn(8, 4), torch.randn(8, 1))
'''

# The same agent, but its encoder class freezes itself when pretrained:
# nothing trainable is cut off.
AGENT_FROZEN_ENCODER = AGENT.replace(
    '''class Agent:''',
    '''class Encoder(nn.Module):
    def __init__(self, obs_dim: int = 12, feature_dim: int = 32, pretrained: bool = True):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, feature_dim), nn.ReLU())
        if pretrained:
            self.requires_grad_(False)

    def forward(self, obs):
        return self.net(obs)


class Agent:''',
).replace(
    "self.encoder = nn.Sequential(nn.Linear(obs_dim, feature_dim), nn.LayerNorm(feature_dim), nn.Tanh())",
    "self.encoder = Encoder(obs_dim, feature_dim)",
)

# MAML adapting a deep copy: the meta-loss trains the copy, and the
# meta-optimizer steps the original, which no graph reaches.
MAML = '''
import copy

import torch
from torch import nn


class Regressor(nn.Module):
    def __init__(self, in_dim: int = 8, hidden: int = 40):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x)


class MAMLLearner:
    def __init__(self, model: Regressor, inner_lr: float = 0.01, meta_lr: float = 1e-3):
        self.model = model
        self.inner_lr = inner_lr
        self.criterion = nn.MSELoss()
        self.meta_optimizer = torch.optim.Adam(self.model.parameters(), lr=meta_lr)

    def adapt(self, support_x, support_y):
        fast = copy.deepcopy(self.model)
        loss = self.criterion(fast(support_x), support_y)
        grads = torch.autograd.grad(loss, fast.parameters(), create_graph=True)
        for param, grad in zip(fast.parameters(), grads):
            param.data -= self.inner_lr * grad
        return fast

    def outer_update(self, meta_loss):
        self.meta_optimizer.zero_grad()
        meta_loss.backward()
        self.meta_optimizer.step()

    def meta_train_step(self, support_x, support_y, query_x, query_y):
        fast = self.adapt(support_x, support_y)
        meta_loss = self.criterion(fast(query_x), query_y)
        self.outer_update(meta_loss)
        return meta_loss.item()


if __name__ == "__main__":
    learner = MAMLLearner(Regressor())
    x = torch.randn(20, 8)
    learner.meta_train_step(x, x.sum(1, keepdim=True), x, x.sum(1, keepdim=True))
'''

# A consistency loss whose student prediction goes through the EMA model
# under `no_grad`: the term is a constant.
CONSISTENCY = '''
import copy

import torch
import torch.nn.functional as F
from torch import nn


class Denoiser(nn.Module):
    def __init__(self, dim: int = 8, hidden: int = 64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim + 1, hidden), nn.SiLU(), nn.Linear(hidden, dim))

    def forward(self, x, t):
        return self.net(torch.cat([x, t[:, None]], dim=-1))


class ConsistencyPolicy(nn.Module):
    def __init__(self, dim: int = 8):
        super().__init__()
        self.model = Denoiser(dim)
        self.model_ema = copy.deepcopy(self.model).requires_grad_(False)

    def compute_loss(self, x0):
        t = torch.rand(x0.shape[0])
        noisy = x0 + torch.randn_like(x0) * t[:, None]
        pred = self.model(noisy, t)
        with torch.no_grad():
            pred = self.model_ema(pred, t * 0.5)
            target = self.model_ema(noisy, t * 0.5)
        losses = {"consistency": F.mse_loss(pred, target), "dsm": F.mse_loss(self.model(noisy, t), x0)}
        return sum(losses.values())


if __name__ == "__main__":
    policy = ConsistencyPolicy()
    opt = torch.optim.Adam(policy.model.parameters(), lr=1e-4)
    loss = policy.compute_loss(torch.randn(16, 8))
    opt.zero_grad()
    loss.backward()
    opt.step()
'''

# An introspective VAE: the decoder's loss adds an adversarial term on prior
# samples that reaches the decoder only through `xp.detach()`.
INTRO_VAE = '''
import torch
import torch.nn.functional as F
from torch import nn


class IntroVAE(nn.Module):
    def __init__(self, dim: int = 32, z_dim: int = 4, alpha: float = 0.25):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim, 64), nn.ReLU(), nn.Linear(64, 2 * z_dim))
        self.decoder = nn.Sequential(nn.Linear(z_dim, 64), nn.ReLU(), nn.Linear(64, dim))
        self.alpha = alpha
        self.opt_dec = torch.optim.Adam(self.decoder.parameters(), lr=2e-4)

    def kld(self, h):
        mu, logvar = h.chunk(2, dim=1)
        return -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), dim=1).mean()

    def update_decoder(self, x):
        mu, _ = self.encoder(x).chunk(2, dim=1)
        xr = self.decoder(mu.detach())
        xp = self.decoder(torch.randn_like(mu))
        loss = F.mse_loss(xr, x) + self.alpha * (self.kld(self.encoder(xr)) + self.kld(self.encoder(xp.detach())))
        self.opt_dec.zero_grad()
        loss.backward()
        self.opt_dec.step()
        return loss.item()


if __name__ == "__main__":
    model = IntroVAE()
    model.update_decoder(torch.rand(6, 32))
'''

# An evaluation loop that calls `forward` directly (module hooks never fire).
ENCODE_WITH_FORWARD = '''
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self, in_dim: int = 20, hidden: int = 64, out_dim: int = 16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, out_dim))

    def forward(self, x):
        return nn.functional.normalize(self.net(x), dim=-1)


def encode_all(model, loader):
    model.eval()
    embeddings = []
    for x, _ in loader:
        emb = model.forward(x)
        embeddings.append(emb)
    return torch.cat(embeddings)


if __name__ == "__main__":
    model = Encoder()
    loader = [(torch.randn(32, 20), torch.zeros(32)) for _ in range(4)]
    print(encode_all(model, loader).shape)
'''

# An evaluation loop through a prediction method of the model.
EVALUATE_WITH_PREDICT = '''
import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self, in_dim: int = 20, hidden: int = 64, classes: int = 5):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU())
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.head(self.backbone(x))

    def predict(self, x):
        logits = self.forward(x)
        return logits.softmax(dim=-1)


def evaluate(model, loader):
    model.eval()
    probs = []
    for x, _ in loader:
        probs.append(model.predict(x))
    return torch.cat(probs)


if __name__ == "__main__":
    model = Classifier()
    loader = [(torch.randn(32, 20), torch.zeros(32)) for _ in range(4)]
    print(evaluate(model, loader).shape)
'''

# The same loop, but the prediction method is wrapped by a decorator of the
# file that runs it under `no_grad`: no graph is recorded.
EVALUATE_WITH_DECORATED_PREDICT = EVALUATE_WITH_PREDICT.replace(
    '''import torch
from torch import nn
''',
    '''import functools

import torch
from torch import nn


def inference(method):
    """Run a prediction method without recording a graph."""

    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with torch.no_grad():
            return method(*args, **kwargs)

    return wrapper
''',
).replace("    def predict(self, x):", "    @inference\n    def predict(self, x):")


def _verdicts(verifier, tmp_path, source, code, text):
    """The verifications of the findings of `code` on the line holding `text`."""
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
    findings = lint_source(path.read_bytes(), str(path), [RULES[code]]).findings
    verified = verifier.verify(findings, lambda display: Path(display).read_text(encoding="utf-8"))
    lines = textwrap.dedent(source).lstrip("\n").splitlines()
    line = next(number for number, line in enumerate(lines, start=1) if text in line)
    found = [f.verification for f in verified if f.line == line]
    assert found, f"no {code} finding on line {line}: {[f.line for f in verified]}"
    return found


def _confirmed(verification):
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification
    return verification.evidence


def test_dl201_parameters_read_through_data_keep_grad_none(verifier, tmp_path):
    evidence = [_confirmed(v) for v in _verdicts(verifier, tmp_path, CUSTOM_LINEAR, "DL201", "self.weight.data")]
    assert sorted(evidence) == [
        "`bias`: requires_grad=True, grad None after backward; no output required grad",
        "`weight`: requires_grad=True, grad None after backward; no output required grad",
    ]


def test_dl201_helper_steps_an_encoder_its_loss_never_reaches(verifier, tmp_path):
    (verification,) = _verdicts(verifier, tmp_path, AGENT, "DL201", "obs.detach()")
    evidence = _confirmed(verification)
    assert "the graph of the loss backpropagated on line 18 (grad_fn=MseLossBackward0)" in evidence
    assert "reaches none of the 4 trainable parameters of `self.encoder`" in evidence


def test_dl201_encoder_frozen_by_its_own_class_is_not_flagged():
    # The encoder's own `__init__` freezes it (`pretrained=True` by default):
    # the cut starves nothing. The same code without the freeze is flagged.
    source = textwrap.dedent(AGENT_FROZEN_ENCODER).lstrip("\n")
    assert not lint_source(source.encode(), "train.py", [RULES["DL201"]]).findings
    thawed = source.replace("pretrained: bool = True", "pretrained: bool = False")
    assert [f.line for f in lint_source(thawed.encode(), "train.py", [RULES["DL201"]]).findings]


def test_dl201_meta_optimizer_steps_a_model_only_its_copy_trained(verifier, tmp_path):
    (verification,) = _verdicts(verifier, tmp_path, MAML, "DL201", "copy.deepcopy(self.model)")
    evidence = _confirmed(verification)
    assert "the graph of the loss backpropagated on line 33 (grad_fn=MseLossBackward0)" in evidence
    assert "reaches none of the 4 trainable parameters of `self.model`" in evidence
    assert "run through the file's call `learner.meta_train_step(" in evidence


def test_dl201_term_computed_under_no_grad_carries_no_graph(verifier, tmp_path):
    (verification,) = _verdicts(verifier, tmp_path, CONSISTENCY, "DL201", "with torch.no_grad():")
    evidence = _confirmed(verification)
    assert "the loss term `F.mse_loss(pred, target)` (line 30) was computed with requires_grad=False, grad_fn=None" in evidence


def test_dl201_term_whose_graph_misses_the_stepped_decoder(verifier, tmp_path):
    (verification,) = _verdicts(verifier, tmp_path, INTRO_VAE, "DL201", "xp.detach()")
    evidence = _confirmed(verification)
    assert "the loss term `self.kld(self.encoder(xp.detach()))`" in evidence
    assert "its graph reaches none of the 4 trainable parameters of `self.decoder`" in evidence


def test_dl301_forward_called_directly_in_the_loop(verifier, tmp_path):
    (verification,) = _verdicts(verifier, tmp_path, ENCODE_WITH_FORWARD, "DL301", "model.forward(x)")
    evidence = _confirmed(verification)
    assert evidence.startswith("`model.forward(x)` returned requires_grad=True (grad_fn=DivBackward0); each evaluation step kept ")
    assert "saved activations alive" in evidence


def test_dl301_prediction_method_records_a_graph(verifier, tmp_path):
    (verification,) = _verdicts(verifier, tmp_path, EVALUATE_WITH_PREDICT, "DL301", "model.predict(x)")
    evidence = _confirmed(verification)
    assert evidence.startswith("`model.predict(x)` returned requires_grad=True (grad_fn=SoftmaxBackward0)")


def test_dl301_prediction_method_under_a_no_grad_decorator_is_refuted(verifier, tmp_path):
    (verification,) = _verdicts(verifier, tmp_path, EVALUATE_WITH_DECORATED_PREDICT, "DL301", "model.predict(x)")
    assert (verification.status, verification.basis) == ("refuted", "user-code"), verification
    assert "no model call it made returned an output with requires_grad=True" in verification.evidence


# A quantizer whose codebook is a parameter only as the file's model builds
# it (`learnable_codebook=True`); built alone it holds a buffer.
LEARNABLE_CODEBOOK = '''
import torch
import torch.nn.functional as F
from torch import nn


class Codebook(nn.Module):
    def __init__(self, dim, size, learnable=False):
        super().__init__()
        embed = torch.randn(size, dim)
        if learnable:
            self.embed = nn.Parameter(embed)
        else:
            self.register_buffer("embed", embed)

    def forward(self, x):
        indices = torch.cdist(x, self.embed).argmin(dim=-1)
        return F.embedding(indices, self.embed), indices


class VectorQuantize(nn.Module):
    def __init__(self, dim, size, learnable_codebook=False):
        super().__init__()
        self._codebook = Codebook(dim, size, learnable=learnable_codebook)

    def forward(self, x):
        quantize, indices = self._codebook(x)
        quantize = x + (quantize - x).detach()
        return quantize, indices


class AutoEncoder(nn.Module):
    def __init__(self, dim=8, size=16):
        super().__init__()
        self.enc = nn.Linear(12, dim)
        self.vq = VectorQuantize(dim, size, learnable_codebook=True)
        self.dec = nn.Linear(dim, 12)

    def forward(self, x):
        quantized, _ = self.vq(self.enc(x))
        return self.dec(quantized)
'''


def test_dl201_members_resolved_in_the_model_that_builds_the_class(tmp_path):
    """When the reproduction carries the file's model, a member that is a
    parameter only as that model builds it is checked there (in-process;
    extraction carries the model, and without it the member is not found)."""
    import ast

    from detachlint.verify.extract import build_spec
    from detachlint.verify.runtime.verdict import run_probe
    from detachlint.verify.runtime.verdict import PROBES

    source = textwrap.dedent(LEARNABLE_CODEBOOK).lstrip("\n")
    path = tmp_path / "vq.py"
    path.write_text(source, encoding="utf-8")
    (finding,) = lint_source(path.read_bytes(), str(path), [RULES["DL201"]]).findings
    spec = build_spec(finding, source)
    assert any(block["text"].startswith("class AutoEncoder") for block in spec["blocks"])
    without = dict(spec, blocks=[b for b in spec["blocks"] if not b["text"].startswith("class AutoEncoder")])
    alone = run_probe(PROBES["DL201"], without, 20)
    assert alone["status"] == "inconclusive" and "has no parameters when built with synthesized arguments" in alone["evidence"]
    lines = source.splitlines(keepends=True)
    have = {block["line"] for block in spec["blocks"]}
    for statement in ast.parse(source).body:
        if isinstance(statement, ast.ClassDef) and statement.lineno not in have:
            spec["blocks"].append({"line": statement.lineno, "text": "".join(lines[statement.lineno - 1 : statement.end_lineno])})
    result = run_probe(PROBES["DL201"], spec, 20)
    assert (result["status"], result["basis"]) == ("confirmed", "user-code"), result
    assert result["evidence"].startswith("`_codebook.embed` in `AutoEncoder`: requires_grad=True, grad None after backward (backward through `AutoEncoder.forward`)")
