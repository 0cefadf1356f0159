"""Batch layouts (`verify/runtime/synthesis.py`): what the synthesized loaders,
datasets and arguments yield, read off how the user's code reads them.
Subscripts and unpacked shapes give the dimensions, keys read by the methods
a value is handed to give a dict batch, a constructor's loader is shaped for
the method that iterates it, and a tensor the code iterates stays a tensor.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from detachlint.engine import lint_source  # noqa: E402
from detachlint.registry import load_rules  # noqa: E402
from detachlint.verify import Verifier, VerifyOptions  # noqa: E402
from detachlint.verify.runtime.standins import Loader  # noqa: E402
from detachlint.verify.runtime.synthesis import Plan, Synth, shape_usage, usage_of  # noqa: E402
from detachlint.verify.runtime.user_code import UserModule  # noqa: E402

RULES = load_rules()


def _function(source, name="f"):
    tree = ast.parse(textwrap.dedent(source))
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def test_the_dimensions_the_code_reads():
    cases = [
        ("def f(test_input, T):\n    for t in range(T):\n        y = test_input[:, :, t]\n", 3),
        ("def f(im):\n    c, H, W = im.shape\n", 3),
        ("def f(x, heads):\n    b, t, e, h = *x.shape, heads\n", 3),
        ("def f(x):\n    n, d = x.size()\n", 2),
        ("def f(x):\n    return x[None, :, 0]\n", 2),  # `None` adds a dimension, reads none
        ("def f(x):\n    return x[..., 0]\n", 0),  # an ellipsis fixes no count
        ("def f(x):\n    head, *rest = x.shape\n", 0),
    ]
    for source, dims in cases:
        function = _function(source)
        assert shape_usage(function, function.args.args[0].arg)[0] == dims, source


def test_a_tuple_key_is_a_dict_key_and_a_tensor_index_is_not():
    function = _function(
        """
        def process_batch(inputs, x):
            features = encoder(inputs[("color_aug", 0, 0)])
            corner = x[0, 1]
            return features, corner
        """,
        "process_batch",
    )
    assert usage_of(function, "inputs")["keys"] == [("color_aug", 0, 0)]
    assert usage_of(function, "x")["keys"] == []


@pytest.fixture()
def module(request):
    modules = []

    def build(source):
        user = UserModule({"path": "train.py", "blocks": [{"line": 1, "text": textwrap.dedent(source)}]})
        modules.append(user)
        return user

    yield build
    for user in modules:
        user.close()


ADVERSARIAL = """
import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(x)


def perturb_each(net, feature, coef=0.01):
    perturb = torch.zeros(feature.size())
    for j, image in enumerate(feature):
        perturb[j] += coef * torch.sign(net(image.unsqueeze(0)))[0].sum()
    return feature + perturb
"""


def test_a_tensor_the_code_iterates_is_a_tensor_not_a_loader(module):
    user = module(ADVERSARIAL)
    synth = Synth(user, Plan(), {})
    node = user.find_function("perturb_each")
    assert synth.role("feature", node) != "loader"
    args, kwargs = synth.arguments(inspect.signature(user.ns["perturb_each"]), node, {}, skip_self=False)
    assert isinstance(kwargs["feature"], torch.Tensor)
    assert user.ns["perturb_each"](*args, **kwargs).shape == kwargs["feature"].shape


VALIDATION = """
import torch
from torch import nn
import torch.nn.functional as F


class Decoder(nn.Module):
    def __init__(self, feat_dim=8, vocab=6, dim=16):
        super().__init__()
        self.encoder = nn.GRU(feat_dim, dim, batch_first=True)
        self.embed = nn.Embedding(vocab, dim)
        self.out = nn.Linear(dim, vocab)

    def forward(self, src, tgt):
        enc, _ = self.encoder(src)
        return self.out(self.embed(tgt[:, :-1]) + enc.mean(1, keepdim=True))


def validate(model, valid_loader_list):
    model.eval()
    losses = []
    for ind in range(len(valid_loader_list)):
        valid_loader = valid_loader_list[ind]
        for data in valid_loader:
            src, tgt = data
            pred = model(src, tgt)
            losses.append(F.cross_entropy(pred.reshape(-1, pred.size(-1)), tgt[:, 1:].reshape(-1)))
    return losses
"""


def test_one_loader_of_several_yields_batches_and_token_ids_fit_the_embedding(module):
    user = module(VALIDATION)
    synth = Synth(user, Plan(), {"param_classes": {"model": "Decoder"}})
    node = user.find_function("validate")
    args, kwargs = synth.arguments(inspect.signature(user.ns["validate"]), node, {}, skip_self=False)
    loaders = kwargs["valid_loader_list"]
    assert isinstance(loaders[0], Loader)
    src, tgt = next(iter(loaders[0]))
    # `tgt[:, :-1]` feeds the embedding: ids below its six rows.
    assert tgt.dtype == torch.long and int(tgt.max()) < 6 and tgt.dim() == 2
    assert len(user.ns["validate"](*args, **kwargs)) == 3 * len(loaders)


POINT_CLOUDS = """
import torch
from torch import nn


class CompletionNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(3, 16)
        self.decoder = nn.Linear(16, 3)

    def forward(self, data):
        return self.decoder(torch.relu(self.encoder(data["partial_cloud"])))


class Runner:
    def __init__(self):
        self.model = CompletionNet()
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def train_step(self, items):
        _, data = items
        loss = self.completion(data)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss

    def completion(self, data):
        refined = self.model(data)
        return torch.nn.functional.mse_loss(refined, data["gtcloud"])
"""


def test_an_unpacked_element_read_as_a_dict_by_the_methods_it_reaches(module):
    user = module(POINT_CLOUDS)
    synth = Synth(user, Plan(), {})
    runner = synth.construct(user.ns["Runner"])
    node = user.find_function("train_step", "Runner")
    args, kwargs = synth.arguments(inspect.signature(runner.train_step), node, {"self": runner}, skip_self=False)
    _, data = kwargs["items"]
    assert set(data) == {"partial_cloud", "gtcloud"}
    assert runner.train_step(*args, **kwargs).requires_grad


# ---------------------------------------------------------------------------
# Whole reproductions: the hazard shown on the user's own code.


@pytest.fixture(scope="module")
def verifier(tmp_path_factory):
    verifier = Verifier(VerifyOptions(timeout=10.0))
    verifier.start([str(tmp_path_factory.getbasetemp())])
    yield verifier
    verifier.close()


def _verdicts(verifier, tmp_path, source, code, text):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
    findings = lint_source(path.read_bytes(), str(path), [RULES[code]]).findings
    verified = verifier.verify(findings, lambda display: Path(display).read_text(encoding="utf-8"))
    lines = textwrap.dedent(source).lstrip("\n").splitlines()
    line = next(number for number, line in enumerate(lines, start=1) if text in line)
    found = [f.verification for f in verified if f.line == line]
    assert found, f"no {code} finding on line {line}: {[f.line for f in verified]}"
    return found


FEDERATED = """
import copy

import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, in_dim=6, n_classes=3):
        super().__init__()
        self.fc1 = nn.Linear(in_dim, 16)
        self.fc2 = nn.Linear(16, n_classes)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


class Client:
    def __init__(self, model, train_data, test_data, learning_rate=0.01):
        self.model = copy.deepcopy(model)
        self.trainloader = train_data
        self.testloader = test_data
        self.loss = nn.NLLLoss()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=learning_rate)

    def train(self):
        self.model.train()
        for x, y in self.trainloader:
            self.optimizer.zero_grad()
            self.loss(self.model(x), y).backward()
            self.optimizer.step()

    def test(self):
        self.model.eval()
        correct, loss = 0, 0
        for x, y in self.testloader:
            output = self.model(x)
            loss += self.loss(output, y)
            correct += (output.argmax(1) == y).sum().item()
        return correct, loss
"""


def test_a_loader_the_constructor_keeps_is_shaped_for_the_method_that_iterates_it(verifier, tmp_path):
    (verification,) = _verdicts(verifier, tmp_path, FEDERATED, "DL301", "output = self.model(x)")
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification
    assert "returned requires_grad=True" in verification.evidence


DEPTH = """
import torch
from torch import nn
import torch.nn.functional as F


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        return F.relu(self.conv(x))


class Decoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = nn.Conv2d(8, 1, 3, padding=1)

    def forward(self, features):
        return {("disp", 0): torch.sigmoid(self.head(features))}


class Trainer:
    def __init__(self, options, train_loader, val_loader):
        self.opt = options
        self.models = {"encoder": Encoder(), "depth": Decoder()}
        params = [p for m in self.models.values() for p in m.parameters()]
        self.model_optimizer = torch.optim.Adam(params, 1e-3)
        self.train_loader = train_loader
        self.val_loader = val_loader
        self.val_iter = iter(self.val_loader)

    def process_batch(self, inputs):
        outputs = self.models["depth"](self.models["encoder"](inputs[("color_aug", 0, 0)]))
        return outputs, {"loss": (outputs[("disp", 0)] - 0.5).abs().mean()}

    def val(self):
        for m in self.models.values():
            m.eval()
        inputs = next(self.val_iter)
        with torch.no_grad():
            outputs, losses = self.process_batch(inputs)
            self.model_optimizer.zero_grad()
            losses["loss"].backward()
            self.model_optimizer.step()
"""


def test_tuple_keys_read_by_a_method_the_batch_is_handed_to(verifier, tmp_path):
    verifications = _verdicts(verifier, tmp_path, DEPTH, "DL302", 'losses["loss"].backward()')
    assert any(
        (v.status, v.basis) == ("confirmed", "user-code") and "does not require grad" in v.evidence for v in verifications
    ), verifications


ACTOR_CRITIC = """
import numpy as np
import torch
from torch import nn
import torch.nn.functional as F
from torch.distributions import Categorical


class ActorCritic(nn.Module):
    def __init__(self, state_size=4, action_size=2, hidden=32):
        super().__init__()
        self.fc = nn.Linear(state_size, hidden)
        self.actor = nn.Linear(hidden, action_size)
        self.critic = nn.Linear(hidden, 1)

    def forward(self, state):
        x = F.relu(self.fc(state))
        return F.softmax(self.actor(x), dim=-1), self.critic(x)


class CartPole:
    def __init__(self, state_size=4, horizon=6):
        self.state_size, self.horizon, self.t = state_size, horizon, 0

    def reset(self):
        self.t = 0
        return np.random.randn(self.state_size).astype(np.float32)

    def step(self, action):
        self.t += 1
        return np.random.randn(self.state_size).astype(np.float32), float(action == 0), self.t >= self.horizon


class Worker:
    def __init__(self, net, env, gamma=0.99):
        self.net = net
        self.optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
        self.env = env
        self.gamma = gamma
        self.memory = []

    def learn(self):
        R, returns = 0.0, []
        for _, _, r in reversed(self.memory):
            R = r + self.gamma * R
            returns.insert(0, R)
        returns = torch.tensor(returns).unsqueeze(1)
        values = torch.cat([t[0] for t in self.memory])
        log_probs = torch.tensor([t[1] for t in self.memory])
        advantages = returns - values.detach()
        loss = -(log_probs.unsqueeze(1) * advantages).mean() + F.mse_loss(values, returns)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        self.memory = []

    def run_episode(self):
        state, done = self.env.reset(), False
        while not done:
            probs, value = self.net(torch.from_numpy(state).unsqueeze(0))
            m = Categorical(probs)
            action = m.sample()
            state, reward, done = self.env.step(action.item())
            self.memory.append((value, m.log_prob(action), reward))
        self.learn()


if __name__ == "__main__":
    Worker(ActorCritic(), CartPole()).run_episode()
"""


def test_a_list_the_constructor_leaves_empty_is_filled_by_the_method_that_calls_the_target(verifier, tmp_path):
    verifications = _verdicts(verifier, tmp_path, ACTOR_CRITIC, "DL201", "log_probs = torch.tensor(")
    assert any((v.status, v.basis) == ("confirmed", "user-code") for v in verifications), verifications
