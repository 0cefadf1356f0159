"""Facts behind the `.data` rules: 0-dim values, shape-changing values,
code that runs while a model trains (`phases`), and where a cut does harm
(`graph_cuts`)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from detachlint.analysis import Facts
from detachlint.analysis.graph_cuts import GraphCuts
from detachlint.analysis.phases import StepPhases
from detachlint.analysis.tensors import TensorFacts


def facts_of(source: str) -> Facts:
    return Facts(cst.parse_module(textwrap.dedent(source)))


def expression(facts: Facts, kind, text: str):
    for node in facts.index.nodes(kind):
        if facts.module.code_for_node(node) == text:
            return node
    raise AssertionError(f"no {kind.__name__} {text!r}")


# 0-dim values --------------------------------------------------------------------


@pytest.mark.parametrize(
    "line, scalar",
    [
        ("v = F.cross_entropy(out, y)", True),
        ("v = F.cross_entropy(out, y, reduction='none')", False),
        ("v = criterion(out, y)", True),
        ("v = out.sum()", True),
        ("v = out.sum(1)", False),
        ("v = out.norm(2) + 0.1 * out.mean()", True),
        ("v = out[0]", False),
    ],
)
def test_a_scalar_is_a_loss_or_a_full_reduction(line, scalar):
    facts = facts_of(
        f"""
        import torch.nn.functional as F

        def step(model, x, y, criterion):
            out = model(x)
            {line}
            return v
        """
    )
    returned = facts.index.nodes(cst.Return)[0].value
    assert facts.shared("tensors", TensorFacts).is_scalar(returned) is scalar


def test_a_value_backward_is_called_on_without_gradient_is_a_scalar():
    facts = facts_of(
        """
        def step(model, crit, x, y):
            loss = crit(model(x), y)
            loss.backward()
            out = model(x)
            out.backward(gradient=out)
            return loss, out
        """
    )
    tensors = facts.shared("tensors", TensorFacts)
    returned = facts.index.nodes(cst.Return)[0].value
    loss, out = (element.value for element in returned.elements)
    assert tensors.is_scalar(loss) and not tensors.is_scalar(out)


@pytest.mark.parametrize(
    "value, changes",
    [
        ("w.data[:, :90]", True),
        ("torch.index_select(w.data, 1, idx)", True),
        ("torch.randn(5, 2)", True),
        ("w.data.half()", False),
        ("vectors", False),
        ("state['w']", False),
    ],
)
def test_a_shape_changing_value_is_a_slice_a_selection_or_a_sized_factory(value, changes):
    facts = facts_of(
        f"""
        import torch

        def f(layer, idx, vectors, state):
            w = layer.weight
            layer.weight.data = {value}
        """
    )
    assign = [a for a in facts.index.nodes(cst.Assign) if isinstance(a.targets[0].target, cst.Attribute)][0]
    assert facts.shared("tensors", TensorFacts).may_change_shape(assign.value) is changes


# Code that runs while a model trains ----------------------------------------------


TRAINING = """
import torch
import torch.nn.functional as F
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.setup()

    def setup(self):
        marker_setup = 1

    def forward(self, x):
        return self.fc(x)

    def prune(self):
        marker_prune = 1

def thin(model):
    marker_thin = 1

def grow(model):
    marker_grow = 1

class Policy:
    def __init__(self, func):
        self.func = func

def train(net, optimizer, loader):
    for x, y in loader:
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        optimizer.step()
        net.prune()

def run(net, loader):
    grow(net)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    policy = Policy(thin)
    train(net, optimizer, loader)
"""


@pytest.mark.parametrize(
    "marker, during",
    [("marker_prune", True), ("marker_thin", True), ("marker_grow", False), ("marker_setup", False)],
)
def test_a_function_runs_during_training_when_called_from_a_training_step_or_after_an_optimizer(marker, during):
    facts = facts_of(TRAINING)
    assign = [a for a in facts.index.nodes(cst.Assign) if facts.module.code_for_node(a.targets[0].target) == marker][0]
    assert facts.shared("phases", StepPhases).runs_during_training(assign) is during


# Where a cut does harm ------------------------------------------------------------


def test_a_factor_cut_from_a_value_that_scales_the_value_itself_reaches_the_forward_output():
    facts = facts_of(
        """
        import torch.nn.functional as F
        from torch import nn

        class Focal(nn.Module):
            def forward(self, logits, target):
                logpt = F.log_softmax(logits, 1).gather(1, target)
                pt = logpt.data.exp()
                weight = target.data.float()
                return ((1 - pt) ** 2 * logpt * weight).mean()
        """
    )
    cuts = facts.shared("graph_cuts", GraphCuts)
    seed = expression(facts, cst.Attribute, "logpt.data")
    product = cuts.weighs_itself(seed, "logpt")
    assert product is not None and cuts.reaches_graph_output(product)
    assert cuts.weighs_itself(expression(facts, cst.Attribute, "target.data"), "target") is None


def test_a_state_cut_in_a_forward_loop_and_an_alias_kept_in_optimizer_state():
    facts = facts_of(
        """
        import torch
        from torch import nn

        class Cell(nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = nn.GRUCell(4, 4)

            def forward(self, xs):
                h = xs.new_zeros(xs.size(0), 4)
                for t in range(xs.size(1)):
                    out = self.cell(xs[:, t], h)
                    h = h.data.clone()
                    h[:] = out
                return h

        class Opt(torch.optim.Optimizer):
            def step(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        grad = p.grad.data
                        copy = p.grad.data
                        self.state[p]["prev"] = grad
                        self.state[p]["other"] = copy.clone()
        """
    )
    cuts = facts.shared("graph_cuts", GraphCuts)
    assert cuts.carried_state_cut(expression(facts, cst.Attribute, "h.data")) is not None
    kept, copied = (
        a for a in facts.index.nodes(cst.Assign) if facts.module.code_for_node(a.value) == "p.grad.data"
    )
    owner = kept.value.value
    assert cuts.kept_alias(kept, owner, edited_by_autograd=True) is not None
    assert cuts.kept_alias(copied, owner, edited_by_autograd=True) is None


def test_a_loss_helper_of_the_file_returning_scalars_gives_a_scalar():
    facts = facts_of(
        """
        import torch
        from torch import nn

        def vae_loss(recon, x, mu, logvar, n):
            mse = nn.MSELoss()(recon, x)
            kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
            kld /= n
            return kld + mse

        def features(model, x):
            return model(x)

        def evaluate(model, x, n):
            recon, mu, logvar = model(x)
            return vae_loss(recon, x, mu, logvar, n), features(model, x)
        """
    )
    tensors = facts.shared("tensors", TensorFacts)
    returned = facts.index.nodes(cst.Return)[-1].value
    loss, feats = (element.value for element in returned.elements)
    assert tensors.is_scalar(loss) and not tensors.is_scalar(feats)
