"""The verifier runs the file's own call of a caller when the finding's
method alone does not do the program's backward or step: a method of the
same class (`meta_train_step` reaching `inner_update`), a method of another
class reaching it through a member (`self.env.get_logprobs(...)`), a
function given the model or the optimizer (`train(model, ...)`,
`optimizer.step()`), a class method called on its class."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

from detachlint.engine import lint_source
from detachlint.registry import load_rules
from detachlint.verify.extract import build_spec

pytest.importorskip("torch")  # the verifier's extra

from detachlint.verify.runtime.verdict import PROBES, run_probe  # noqa: E402

RULES = load_rules()


def _finding(tmp_path: Path, source: str, code: str, marker: str, name: str = "user.py"):
    source = textwrap.dedent(source).lstrip("\n")
    path = tmp_path / name
    path.write_text(source, encoding="utf-8")
    line = next(n for n, text in enumerate(source.splitlines(), 1) if marker in text)
    found = [f for f in lint_source(path.read_bytes(), str(path), [RULES[code]]).findings if f.line == line]
    assert found, f"no {code} finding on line {line}"
    return found[0], source


def _verify(finding, source):
    spec = build_spec(finding, source)
    return spec, run_probe(PROBES[finding.code], spec, 30)


def _same_finding_on(tmp_path: Path, finding, fixed: str):
    """The finding as the linter reported it, on the fixed program (same lines):
    what the run of the fixed code says of it."""
    fixed = textwrap.dedent(fixed).lstrip("\n")
    path = tmp_path / "fixed.py"
    path.write_text(fixed, encoding="utf-8")
    return dataclasses.replace(finding, path=str(path)), fixed


META_LEARNER = '''
import copy

import torch
from torch import nn


class Regressor(nn.Module):
    def __init__(self, features=5, hidden=12):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(features, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.body(x)


class Reptile:
    def __init__(self, model, inner_lr=0.1, outer_lr=1e-3, inner_steps=2):
        self.model = model
        self.inner_lr = inner_lr
        self.inner_steps = inner_steps
        self.loss_fn = nn.MSELoss()
        self.outer = torch.optim.SGD(self.model.parameters(), lr=outer_lr)

    def adapt(self, model, xs, ys):
        fast = copy.deepcopy(model)
        for _ in range(self.inner_steps):
            loss = self.loss_fn(fast(xs), ys)
            grads = torch.autograd.grad(loss, fast.parameters(), create_graph=True)
            for weight, grad in zip(fast.parameters(), grads):
                weight.data -= self.inner_lr * grad
        return fast

    def apply_meta_loss(self, meta_loss):
        self.outer.zero_grad()
        meta_loss.backward()
        self.outer.step()

    def train_on(self, episodes):
        meta_loss = 0.0
        for xs, ys, xq, yq in episodes:
            fast = self.adapt(self.model, xs, ys)
            meta_loss += self.loss_fn(fast(xq), yq)
        meta_loss = meta_loss / len(episodes)
        self.apply_meta_loss(meta_loss)
        return meta_loss.item()


def episode(features=5):
    w = torch.randn(features, 1)
    xs, xq = torch.randn(6, features), torch.randn(6, features)
    return xs, xs @ w, xq, xq @ w


if __name__ == "__main__":
    learner = Reptile(Regressor())
    episodes = [episode() for _ in range(2)]
    learner.train_on(episodes)
'''


def test_a_method_of_the_class_that_calls_the_cut_and_the_backward_runs_through_the_files_call(tmp_path):
    finding, source = _finding(tmp_path, META_LEARNER, "DL201", "fast = copy.deepcopy(model)")
    spec, result = _verify(finding, source)
    assert spec["call_site"]["call"] == "learner.train_on(episodes)"
    assert (result["status"], result.get("basis")) == ("confirmed", "user-code"), result
    assert result["evidence"].startswith("the graph of the loss backpropagated on line 35")
    assert "reaches none of the 4 trainable parameters of `model`" in result["evidence"]


POLICY_AGENT = '''
import torch
from torch import nn


class GridEnv:
    def __init__(self, n_actions=3, size=4):
        self.n_actions = n_actions
        self.size = size

    def encode(self, states):
        return nn.functional.one_hot(states, self.size).float().flatten(1)

    def action_logprobs(self, outputs, actions):
        logits = outputs.detach()
        return torch.log_softmax(logits, dim=1)[torch.arange(outputs.shape[0]), actions]


class Agent:
    def __init__(self, env, hidden=16):
        self.env = env
        self.policy = nn.Sequential(nn.Linear(2 * env.size, hidden), nn.ReLU(), nn.Linear(hidden, env.n_actions))
        self.log_z = nn.Parameter(torch.zeros(1))
        self.optimizer = torch.optim.Adam(list(self.policy.parameters()) + [self.log_z], lr=1e-2)

    def objective(self, states, actions):
        logp = self.env.action_logprobs(self.policy(self.env.encode(states)), actions)
        return (self.log_z + logp).pow(2).mean()

    def update(self, batch=8):
        states = torch.randint(0, self.env.size, (batch, 2))
        actions = torch.randint(0, self.env.n_actions, (batch,))
        loss = self.objective(states, actions)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss.item()


if __name__ == "__main__":
    agent = Agent(GridEnv())
    for _ in range(2):
        agent.update()
'''


def test_a_method_of_another_class_reaching_the_cut_through_a_member_confirms(tmp_path):
    finding, source = _finding(tmp_path, POLICY_AGENT, "DL201", "logits = outputs.detach()")
    spec, result = _verify(finding, source)
    assert spec["call_site"]["call"] == "agent.update()"
    assert (result["status"], result.get("basis")) == ("confirmed", "user-code"), result
    assert "reaches none of the 4 trainable parameters of `self.policy`" in result["evidence"]


def test_the_same_run_refutes_when_the_policy_output_keeps_its_graph(tmp_path):
    finding, _ = _finding(tmp_path, POLICY_AGENT, "DL201", "logits = outputs.detach()")
    fixed_finding, fixed = _same_finding_on(tmp_path, finding, POLICY_AGENT.replace("outputs.detach()", "outputs.clone()"))
    _, result = _verify(fixed_finding, fixed)
    assert result["status"] == "refuted", result
    assert "reaches `self.policy." in result["evidence"]


QUEUE_MODEL = '''
import torch
from torch import nn


class QueueContrast(nn.Module):
    def __init__(self, dim=6, size=12):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, dim))
        self.register_buffer("bank", nn.functional.normalize(torch.randn(dim, size), dim=0))
        self.size = size
        self.ptr = 0

    def forward(self, x, keys):
        q = nn.functional.normalize(self.encoder(x), dim=1)
        negatives = q @ self.bank.detach()
        self.bank[:, self.ptr:self.ptr + keys.shape[0]] = keys.T
        self.ptr = (self.ptr + keys.shape[0]) % self.size
        return negatives


def fit(model, batches, optimizer):
    for x, keys in batches:
        loss = model(x, keys).logsumexp(dim=1).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    net = QueueContrast()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    batches = [(torch.randn(4, 10), torch.randn(4, 6))]
    fit(net, batches, optimizer)
'''


def test_a_forward_runs_through_the_function_the_file_gives_the_model(tmp_path):
    finding, source = _finding(tmp_path, QUEUE_MODEL, "DL204", "negatives = q @ self.bank.detach()")
    spec, result = _verify(finding, source)
    assert spec["call_site"]["call"] == "fit(net, batches, optimizer)"
    assert (result["status"], result.get("basis")) == ("confirmed", "user-code"), result
    assert "modified by an inplace operation" in result["evidence"]


MOMENTUM_OPTIMIZER = '''
import torch
from torch import nn
from torch.optim import Optimizer


class GradDelta(Optimizer):
    def __init__(self, params, lr=1e-2):
        super().__init__(params, dict(lr=lr))

    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad.data
                state = self.state[p]
                if "last" not in state:
                    state["last"] = torch.zeros_like(p)
                change = (grad - state["last"]).abs()
                state["last"] = grad
                p.data.add_(grad * torch.sigmoid(change), alpha=-group["lr"])


def run(model, optimizer, data, target, steps):
    criterion = nn.MSELoss()
    for _ in range(steps):
        optimizer.zero_grad(set_to_none=False)
        criterion(model(data), target).backward()
        optimizer.step()


if __name__ == "__main__":
    model = nn.Linear(4, 1)
    data, target = torch.randn(10, 4), torch.randn(10, 1)
    optimizer = GradDelta(model.parameters(), lr=0.05)
    run(model, optimizer, data, target, steps=4)
'''


def test_an_optimizer_step_runs_after_the_files_own_backward(tmp_path):
    finding, source = _finding(tmp_path, MOMENTUM_OPTIMIZER, "DL103", "grad = p.grad.data")
    spec, result = _verify(finding, source)
    assert spec["call_site"]["call"] == "run(model, optimizer, data, target, steps=4)"
    assert (result["status"], result.get("basis")) == ("confirmed", "user-code"), result
    assert "rewritten in place before line" in result["evidence"]


def test_the_optimizer_step_refutes_when_the_gradient_is_copied(tmp_path):
    finding, _ = _finding(tmp_path, MOMENTUM_OPTIMIZER, "DL103", "grad = p.grad.data")
    fixed = MOMENTUM_OPTIMIZER.replace('state["last"] = grad\n', 'state["last"] = grad.clone()\n')
    fixed_finding, fixed = _same_finding_on(tmp_path, finding, fixed)
    _, result = _verify(fixed_finding, fixed)
    assert result["status"] in ("refuted", "inconclusive"), result
    assert "has its own storage" in result["evidence"], result


ROTATIONS = '''
import numpy as np
import torch
from torch import nn


class Rotation:
    def __init__(self, mat):
        self.mat = mat

    @classmethod
    def check(cls, mat):
        det = torch.as_tensor(np.linalg.det(mat.numpy()), dtype=mat.dtype)
        return bool(((det - 1).abs() < 1e-3).all())

    @classmethod
    def from_matrix(cls, mat):
        if not cls.check(mat):
            raise ValueError("not a rotation")
        return cls(mat)

    def angle(self):
        return torch.atan2(self.mat[:, 1, 0], self.mat[:, 0, 0])


class AngleNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 1)

    def forward(self, x):
        theta = self.fc(x).squeeze(1)
        c, s = torch.cos(theta), torch.sin(theta)
        return torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)


def angle_loss(pred, target):
    return nn.functional.mse_loss(Rotation.from_matrix(pred).angle(), target)


def train(net, batches, optimizer):
    for x, target in batches:
        loss = angle_loss(net(x), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    net = AngleNet()
    optimizer = torch.optim.Adam(net.parameters())
    batches = [(torch.randn(5, 6), torch.rand(5))]
    with torch.no_grad():
        Rotation.check(net(batches[0][0]))
    train(net, batches, optimizer)
'''


def test_a_class_method_runs_through_the_training_call_not_the_no_grad_one(tmp_path):
    finding, source = _finding(tmp_path, ROTATIONS, "DL402", "np.linalg.det(mat.numpy())")
    spec, result = _verify(finding, source)
    assert spec["call_site"]["call"] == "train(net, batches, optimizer)"
    assert (result["status"], result.get("basis")) == ("confirmed", "user-code"), result
    assert "Can't call numpy() on Tensor that requires grad" in result["evidence"]


MONITOR = '''
import torch
from torch import nn


class OutputRecorder:
    def __init__(self, model):
        self.kept = {}
        for name, module in model.named_modules():
            if isinstance(module, nn.Linear):
                module.register_forward_hook(self._keep(name))

    def _keep(self, name):
        def hook(module, inputs, output):
            self.kept[name] = output
        return hook

    def norms(self):
        found = {}
        for name, out in self.kept.items():
            if out.grad is not None:
                found[name] = out.grad.norm().item()
        return found


def backprop(model, recorder, x):
    model(x).sum().backward()
    return recorder.norms()


if __name__ == "__main__":
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    recorder = OutputRecorder(model)
    x = torch.randn(3, 4)
    backprop(model, recorder, x)
'''


def test_a_method_read_after_the_callers_backward_runs_through_that_caller(tmp_path):
    finding, source = _finding(tmp_path, MONITOR, "DL503", "if out.grad is not None:")
    spec, result = _verify(finding, source)
    assert spec["call_site"]["call"] == "backprop(model, recorder, x)"
    assert (result["status"], result.get("basis")) == ("confirmed", "user-code"), result
    assert "is_leaf=False, requires_grad=True" in result["evidence"]


GATED_CELL = '''
import torch
from torch import nn


class Gate(nn.Module):
    def __init__(self, features, hidden, keep_gates=False):
        super().__init__()
        self.inp = nn.Linear(features, hidden)
        self.rec = nn.Linear(hidden, hidden)
        self.keep_gates = keep_gates
        self.kept = []

    def forward(self, x, h):
        z = torch.sigmoid(self.inp(x) + self.rec(h))
        if self.keep_gates:
            z.requires_grad = True
            self.kept.append(z)
        return (1 - z) * h + z * torch.tanh(self.inp(x))


def unroll(cell, xs, hidden):
    h = torch.zeros(xs.shape[1], hidden)
    for x in xs:
        h = cell(x, h)
    h.sum().backward()


if __name__ == "__main__":
    xs = torch.randn(3, 2, 4)
    unroll(Gate(4, 5), xs, 5)
    unroll(Gate(4, 5, keep_gates=True), xs, 5)
'''


def test_a_callers_call_that_does_not_reach_the_line_forces_no_if(tmp_path):
    """The file's first call builds the cell without the flag: the run goes on
    to the file's other constructions instead of forcing the `if`."""
    finding, source = _finding(tmp_path, GATED_CELL, "DL504", "z.requires_grad = True")
    spec, result = _verify(finding, source)
    assert spec["call_site"].get("chain")
    assert (result["status"], result.get("basis")) == ("confirmed", "user-code"), result
    assert "forced" not in result["evidence"]
