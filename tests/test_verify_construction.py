"""What a reproduction carries and builds, as the user's program does.

Module-level values a class reads (a vocabulary built with a
comprehension), the file's own call of a method on an instance it builds
through a chained call (`Wrapper(...).setup()`), a method that sets the
attributes another reads, a base class's method run on the file's concrete
subclass, the file's own constructor calls (nested, or fed by script
statements), and a method of the class that calls the target with what it
builds.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from detachlint.engine import lint_source
from detachlint.registry import load_rules
from detachlint.verify import Verifier, VerifyOptions
from detachlint.verify.extract import build_spec

pytest.importorskip("torch")

RULES = load_rules()


def _write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
    return path


def _findings(path: Path, codes):
    return lint_source(path.read_bytes(), str(path), [RULES[c] for c in codes]).findings


@pytest.fixture(scope="module")
def verifier(tmp_path_factory):
    verifier = Verifier(VerifyOptions(timeout=10.0))
    verifier.start([str(tmp_path_factory.getbasetemp())])
    yield verifier
    verifier.close()


def _verdict(verifier, path: Path, code: str):
    findings = _findings(path, [code])
    assert findings, f"no {code} finding"
    verified = verifier.verify(findings, lambda display: Path(display).read_text(encoding="utf-8"))
    return next(f.verification for f in verified if f.code == code)


CHAR_RNN = '''
import torch
from torch import nn

corpus = "the cat sat on the mat and the dog sat on the log " * 3
vocab = sorted(set(corpus))
stoi = {ch: i for i, ch in enumerate(vocab)}


class CharModel(nn.Module):
    def __init__(self, n_vocab, width=16):
        super().__init__()
        self.width = width
        self.embed = nn.Embedding(n_vocab, width)
        self.cell = nn.GRU(width, width)
        self.out = nn.Linear(width, n_vocab)

    def forward(self, token, state):
        x = self.embed(token).view(1, 1, -1)
        y, state = self.cell(x, state)
        return self.out(y.view(1, -1)), state


class Trainer:
    def __init__(self, model, lr=0.01):
        self.model = model
        self.opt = torch.optim.SGD(model.parameters(), lr=lr)

    def pairs(self):
        for a, b in zip(corpus[:-1], corpus[1:]):
            yield torch.tensor([stoi[a]]), torch.tensor([stoi[b]])

    def fit(self):
        state = torch.zeros(1, 1, self.model.width)
        for step, (token, nxt) in enumerate(self.pairs()):
            logits, state = self.model(token, state)
            if step % 5 == 4:
                loss = nn.functional.cross_entropy(logits, nxt)
                self.opt.zero_grad()
                loss.backward(retain_graph=True)
                self.opt.step()
                state.detach()
'''


def test_a_module_level_vocabulary_built_with_a_comprehension_is_carried(verifier, tmp_path):
    path = _write(tmp_path, "char_rnn.py", CHAR_RNN)
    finding = _findings(path, ["DL206"])[0]
    spec = build_spec(finding, path.read_text())
    texts = "".join(b["text"] for b in spec["blocks"])
    assert "stoi = {ch: i for i, ch in enumerate(vocab)}" in texts and "vocab = sorted(set(corpus))" in texts
    assert "stoi" not in spec["unavailable"]
    verification = _verdict(verifier, path, "DL206")
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification


CHAINED_SETUP = '''
import torch
from torch import nn


class Wrapper:
    def __init__(self, net_cls, loss_cls, batch=4):
        self.net_cls = net_cls
        self.loss_cls = loss_cls
        self.batch = batch

    def setup(self):
        self.net_ = self.net_cls()
        self.loss_ = self.loss_cls()
        return self

    def score_batch(self, xb, yb):
        self.net_.eval()
        pred = self.net_(xb)
        return {"loss": self.loss_(pred, yb), "pred": pred}

    def validate(self, x, y):
        kept = []
        for i in range(0, len(x), self.batch):
            out = self.score_batch(x[i:i + self.batch], y[i:i + self.batch])
            kept.append(out)
        return kept


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(5, 12), nn.ReLU(), nn.Linear(12, 3))

    def forward(self, x):
        return self.body(x)


if __name__ == "__main__":
    x, y = torch.randn(12, 5), torch.randint(0, 3, (12,))
    wrapper = Wrapper(SmallNet, nn.CrossEntropyLoss).setup()
    wrapper.validate(x, y)
'''


def test_the_files_call_on_an_instance_built_through_a_chained_method(verifier, tmp_path):
    path = _write(tmp_path, "wrapper.py", CHAINED_SETUP)
    spec = build_spec(_findings(path, ["DL301"])[0], path.read_text())
    assert spec["call_site"]["call"] == "wrapper.validate(x, y)"
    verification = _verdict(verifier, path, "DL301")
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification


SETTER = '''
import torch
from torch import nn


class Evaluator:
    def __init__(self, width=16):
        self.width = width

    def build(self):
        self.net_ = nn.Sequential(nn.Linear(8, self.width), nn.ReLU(), nn.Linear(self.width, 3))
        self.loss_ = nn.CrossEntropyLoss()

    def evaluate(self, batches):
        self.net_.eval()
        losses = []
        for x, y in batches:
            logits = self.net_(x)
            losses.append(self.loss_(logits, y))
        return torch.stack(losses).mean()
'''


def test_a_method_that_sets_what_the_target_reads_runs_first(verifier, tmp_path):
    path = _write(tmp_path, "evaluator.py", SETTER)
    verification = _verdict(verifier, path, "DL301")
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification
    assert "stand-in" not in verification.evidence


ABSTRACT_BASE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Estimator(nn.Module):
    def forward(self, *args):
        raise NotImplementedError

    def fit(self, batches, settings):
        opt = torch.optim.SGD(self.parameters(), lr=settings.lr)
        running = 0.0
        for epoch in range(settings.epochs):
            for x, y in batches:
                opt.zero_grad()
                loss = F.cross_entropy(self(x), y)
                loss.backward()
                opt.step()
                running += loss
        return running


class Settings:
    def __init__(self):
        self.lr = 0.05
        self.epochs = 2


class SoftmaxRegression(Estimator):
    def __init__(self, n_in=8, n_out=4):
        super().__init__()
        self.linear = nn.Linear(n_in, n_out)

    def forward(self, x):
        return self.linear(x)


if __name__ == "__main__":
    settings = Settings()
    model = SoftmaxRegression()
    model.fit([(torch.randn(6, 8), torch.randint(0, 4, (6,)))], settings)
'''


def test_a_base_class_method_runs_on_the_files_concrete_subclass(verifier, tmp_path):
    path = _write(tmp_path, "estimator.py", ABSTRACT_BASE)
    verification = _verdict(verifier, path, "DL401")
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification
    assert "autograd nodes reachable from `running`" in verification.evidence


CALLER_METHOD = '''
import torch
import torch.nn.functional as F


def project(points, scales, colors, view, K, width, height, keep_abs=False):
    cam = points @ view[:3, :3].T + view[:3, 3]
    uv = cam @ K.T
    xy = uv[:, :2] / uv[:, 2:3]
    if keep_abs:
        def _keep(grad):
            xy.abs_grad = grad.abs()
        xy.register_hook(_keep)
    ys, xs = torch.meshgrid(torch.arange(height, dtype=points.dtype), torch.arange(width, dtype=points.dtype), indexing="ij")
    pix = torch.stack([xs, ys], dim=-1).reshape(-1, 1, 2)
    alpha = torch.exp(-0.5 * ((pix - xy.unsqueeze(0)) ** 2).sum(-1) / scales.exp().pow(2).unsqueeze(0))
    image = (alpha.unsqueeze(-1) * colors.unsqueeze(0)).sum(1).reshape(height, width, 3)
    info = {"xy": xy, "width": width, "height": height}
    return image, info


class GaussianTrainer:
    def __init__(self, n=12, width=8, height=8, keep_abs=False):
        self.params = torch.nn.ParameterDict({
            "points": torch.nn.Parameter(torch.randn(n, 3) * 0.5 + torch.tensor([0.0, 0.0, 4.0])),
            "scales": torch.nn.Parameter(torch.zeros(n)),
            "colors": torch.nn.Parameter(torch.rand(n, 3)),
        })
        self.optimizer = torch.optim.Adam(self.params.parameters(), lr=1e-2)
        self.width, self.height = width, height
        self.keep_abs = keep_abs
        self.state = {"grad2d": torch.zeros(n)}
        self.view = torch.eye(4)
        self.K = torch.tensor([[8.0, 0.0, 4.0], [0.0, 8.0, 4.0], [0.0, 0.0, 1.0]])

    def render(self):
        return project(self.params["points"], self.params["scales"], self.params["colors"],
                       self.view, self.K, self.width, self.height, keep_abs=self.keep_abs)

    def train(self, targets, max_steps=2):
        for step in range(max_steps):
            image, info = self.render()
            loss = F.l1_loss(image, targets[step % len(targets)])
            self.optimizer.zero_grad()
            loss.backward()
            self.accumulate(info)
            self.optimizer.step()
        return self.state

    def accumulate(self, info):
        if self.keep_abs:
            grads = info["xy"].abs_grad.clone()
        else:
            grads = info["xy"].grad.clone()
        self.state["grad2d"] += grads.norm(dim=-1)


if __name__ == "__main__":
    GaussianTrainer(keep_abs=True).train([torch.rand(8, 8, 3)])
    GaussianTrainer(keep_abs=False).train([torch.rand(8, 8, 3)])
'''


def test_the_method_that_calls_the_target_runs_with_each_of_the_files_constructions(verifier, tmp_path):
    path = _write(tmp_path, "gaussians.py", CALLER_METHOD)
    spec = build_spec(_findings(path, ["DL503"])[0], path.read_text())
    assert spec["hints"]["callers"] == ["train"]
    assert spec["hints"]["ctor_calls"]["GaussianTrainer"] == ["GaussianTrainer(keep_abs=True)", "GaussianTrainer(keep_abs=False)"]
    verification = _verdict(verifier, path, "DL503")
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification
    assert "its .grad was None when read" in verification.evidence


NESTED_AND_FED_CONSTRUCTORS = '''
import torch
from torch import nn
import torch.nn.functional as F


class HardestMiner:
    def pick(self, emb, labels):
        return torch.tensor([[0, 1, 2]])


class TripletCriterion(nn.Module):
    def __init__(self, margin, miner):
        super().__init__()
        self.margin = margin
        self.miner = miner

    def forward(self, emb, labels):
        idx = self.miner.pick(emb, labels)
        gap = (emb[idx[:, 0]] - emb[idx[:, 1]]).pow(2).sum(1) - (emb[idx[:, 0]] - emb[idx[:, 2]]).pow(2).sum(1)
        loss = F.relu(gap + self.margin).mean()
        loss.requires_grad = True
        return loss


class Head(nn.Module):
    def __init__(self, encoder, dim=4):
        super().__init__()
        self.encoder = encoder
        self.proj = nn.Linear(8, dim)

    def forward(self, x):
        return self.proj(self.encoder(x).detach())


if __name__ == "__main__":
    criterion = TripletCriterion(0.5, HardestMiner())
    encoder = nn.Sequential(nn.Linear(6, 8), nn.ReLU())
    head = Head(encoder, dim=4)
'''


def test_the_files_constructor_calls_go_along_nested_and_fed(tmp_path):
    path = _write(tmp_path, "triplets.py", NESTED_AND_FED_CONSTRUCTORS)
    finding = _findings(path, ["DL505"])[0]
    spec = build_spec(finding, path.read_text())
    assert spec["hints"]["ctor_calls"]["TripletCriterion"] == ["TripletCriterion(0.5, HardestMiner())"]
    site = spec["hints"]["ctor_sites"]["Head"]
    assert site["call"] == "Head(encoder, dim=4)"
    assert [ast.unparse(ast.parse(b["text"].strip())) for b in site["statements"]] == [
        "encoder = nn.Sequential(nn.Linear(6, 8), nn.ReLU())"
    ]


def test_an_instance_is_built_from_the_files_own_statements(tmp_path):
    from detachlint.verify.runtime.synthesis import Plan, Synth
    from detachlint.verify.runtime.user_code import UserModule

    path = _write(tmp_path, "triplets.py", NESTED_AND_FED_CONSTRUCTORS)
    spec = build_spec(_findings(path, ["DL505"])[0], path.read_text())
    user = UserModule(spec)
    try:
        synth = Synth(user, Plan(), spec["hints"])
        head = synth.construct(user.ns["Head"])
        assert head.encoder[0].in_features == 6
        criterion = synth.construct(user.ns["TripletCriterion"])
        assert type(criterion.miner).__name__ == "HardestMiner" and criterion.margin == 0.5
    finally:
        user.close()


FORWARD_PRE_HOOK = '''
import torch
import torch.nn as nn


class MaxNormConstraint(object):
    """Forward pre-hook keeping each row of a layer's weight within a norm budget."""

    def __init__(self, name="weight", budget=0.5):
        self.name = name
        self.budget = budget

    def rescale(self, module):
        weight = module._parameters[self.name]
        norms = weight.norm(dim=1, keepdim=True)
        factor = norms.clamp(min=self.budget) / self.budget
        weight.data /= factor
        return weight

    def __call__(self, module, inputs):
        self.rescale(module)


def max_norm(module, name="weight", budget=0.5):
    module.register_forward_pre_hook(MaxNormConstraint(name, budget))
    return module


class Classifier(nn.Module):
    def __init__(self, n_in=10, hidden=16, n_out=3):
        super().__init__()
        self.fc1 = max_norm(nn.Linear(n_in, hidden))
        self.fc2 = max_norm(nn.Linear(hidden, n_out))

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))
'''


def test_a_hook_method_runs_inside_the_forward_of_the_model_that_registers_it(verifier, tmp_path):
    path = _write(tmp_path, "max_norm.py", FORWARD_PRE_HOOK)
    verification = _verdict(verifier, path, "DL101")
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification
    assert "gradients differ from the edit made visible to autograd" in verification.evidence


FED_ATTRIBUTE = '''
import torch
from torch import nn


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 12), nn.Tanh(), nn.Linear(12, 1))

    def forward(self, x):
        return self.net(x)


class Engine:
    def __init__(self, model, lr=0.05):
        self.model = model
        self.criterion = nn.MSELoss()
        self.optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        self.batch = None
        self.loss = None

    def step(self):
        pred = self.model(self.batch).detach()
        self.loss = self.criterion(pred, torch.ones_like(pred))
        if self.loss.requires_grad is False:
            self.loss.requires_grad = True
        self.optimizer.zero_grad()
        self.loss.backward()
        self.optimizer.step()

    def run(self, loader):
        for batch in loader:
            self.batch = batch.float()
            self.step()
'''


def test_an_attribute_the_class_fills_from_its_loader_gets_a_synthesized_batch(verifier, tmp_path):
    path = _write(tmp_path, "engine.py", FED_ATTRIBUTE)
    verification = _verdict(verifier, path, "DL505")
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification
    assert "with a synthesized batch for `self.batch`, which `run` sets from its data" in verification.evidence


def test_a_refutation_through_one_of_several_callers_rules_nothing_out():
    from detachlint.verify.runtime.observe import BASIS
    from detachlint.verify.runtime.verdict import _with_basis

    spec = {"hints": {"callers": ["validate"], "target_calls": 3}}
    BASIS["stand_ins"], BASIS["call_site"], BASIS["caller"] = [], False, "validate"
    try:
        result = _with_basis({"status": "refuted", "evidence": "no graph was kept"}, None, spec)
        assert result["status"] == "inconclusive"
        assert "run through `validate`, which calls it; the file calls it 2 more time(s)" in result["evidence"]
        BASIS["caller"] = None
        kept = _with_basis({"status": "refuted", "evidence": "no graph was kept"}, None, spec)
        assert (kept["status"], kept["basis"]) == ("refuted", "user-code")
    finally:
        BASIS["caller"] = None


def test_the_callers_of_a_method_are_counted_with_every_call_of_it(tmp_path):
    path = _write(tmp_path, "gaussians.py", CALLER_METHOD)
    spec = build_spec(_findings(path, ["DL503"])[0], path.read_text())
    assert spec["hints"]["target_calls"] == 1
