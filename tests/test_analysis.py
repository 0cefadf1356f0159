"""The shared facts rules stand on: names, grad mode, modules, values."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from detachlint.analysis import Facts, Holds
from detachlint.analysis.grad_mode import Mode
from detachlint.analysis.loss_terms import LossTerms


def facts_of(source: str) -> Facts:
    return Facts(cst.parse_module(textwrap.dedent(source)))


def call_named(facts: Facts, text: str) -> cst.Call:
    for call in facts.index.nodes(cst.Call):
        if facts.module.code_for_node(call) == text:
            return call
    raise AssertionError(f"no call {text!r}")


# names -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "imports, expr, qualified",
    [
        ("import torch as th", "th.no_grad", "torch.no_grad"),
        ("from torch import nn, no_grad", "no_grad", "torch.no_grad"),
        ("from torch import nn", "nn.Linear", "torch.nn.Linear"),
        ("import torch.nn.functional as F", "F.relu", "torch.nn.functional.relu"),
        ("import torch.nn", "torch.nn.Module", "torch.nn.Module"),
        ("from torch.autograd import no_grad as ng", "ng", "torch.no_grad"),
        ("from torch.nn.modules.module import Module", "Module", "torch.nn.Module"),
        ("import numpy as np", "np.zeros", "numpy.zeros"),
        ("from .local import no_grad", "no_grad", None),
        ("", "torch.no_grad", None),
    ],
)
def test_qualified_names_through_aliases(imports, expr, qualified):
    facts = facts_of(f"{imports}\nx = {expr}\n")
    value = facts.index.nodes(cst.Assign)[-1].value
    assert facts.names.qualified(value) == qualified


# grad mode ---------------------------------------------------------------------

GRAD_MODE_SOURCE = """
import torch
from torch import no_grad

def plain(model, x):
    return model(x)

@torch.no_grad()
def decorated(model, x):
    return model(x)

@no_grad
def bare(model, x):
    return model(x)

@torch.inference_mode()
def inference(model, x):
    return model(x)

def blocks(model, x):
    with torch.no_grad():
        a = model(x)
        with torch.enable_grad():
            b = model(x)
    with torch.set_grad_enabled(False):
        c = model(x)
    with torch.set_grad_enabled(train):
        d = model(x)
    with torch.inference_mode(False):
        e = model(x)

def switched(model, x):
    f = model(x)
    torch.set_grad_enabled(False)
    g = model(x)

def helper(model, x):
    return model(x)

def caller(model, x):
    with torch.no_grad():
        return helper(model, x)

def sometimes(model, x):
    return model(x)

def caller_two(model, x):
    with torch.no_grad():
        sometimes(model, x)
    sometimes(model, x)
"""


@pytest.mark.parametrize(
    "function, disabled",
    [
        ("plain", False), ("decorated", True), ("bare", True), ("inference", True),
        ("helper", True), ("sometimes", False),
    ],
)
def test_grad_mode_of_functions(function, disabled):
    facts = facts_of(GRAD_MODE_SOURCE)
    for fn in facts.index.nodes(cst.FunctionDef):
        if fn.name.value == function:
            call = next(facts.index.descendants(fn.body, cst.Call))
            assert facts.grad_mode.is_disabled(call) is disabled
            return
    raise AssertionError(function)


@pytest.mark.parametrize("name, disabled", [("a", True), ("b", False), ("c", True), ("d", True), ("e", False), ("f", False), ("g", True)])
def test_grad_mode_of_blocks(name, disabled):
    facts = facts_of(GRAD_MODE_SOURCE)
    for assign in facts.index.nodes(cst.Assign):
        if assign.targets[0].target.value == name:
            assert facts.grad_mode.is_disabled(assign.value) is disabled
            return
    raise AssertionError(name)


# modules -----------------------------------------------------------------------

MODULES_SOURCE = """
import copy
import torch
from torch import nn

class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3)

class Net(Base):
    def __init__(self, teacher):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.act = nn.ReLU()
        self.pool = nn.Sequential(nn.ReLU(), nn.Dropout(0.1))
        self.norm = nn.LayerNorm(4, elementwise_affine=False)
        self.bn = nn.BatchNorm1d(4)
        self.scale = nn.Parameter(torch.ones(1))
        self.fixed = nn.Parameter(torch.ones(1), requires_grad=False)
        self.frozen_by_loop = nn.Linear(4, 4)
        self.frozen_by_call = nn.Linear(4, 4)
        self.target_net = nn.Linear(4, 4)
        self.ema = copy.deepcopy(self.encoder)
        for p in self.frozen_by_loop.parameters():
            p.requires_grad = False
        self.frozen_by_call.requires_grad_(False)

    def forward(self, x):
        return self.encoder(x)

class Wrapped(SomeExternalBase):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        return self.fc(x)

class NotAModule:
    def forward(self, x):
        return x
"""


def test_module_classes_members_and_freezing():
    facts = facts_of(MODULES_SOURCE)
    classes = facts.modules.classes
    assert set(classes) == {"Base", "Net", "Wrapped"}
    net = classes["Net"]
    assert net.trainable_members() == {"stem", "encoder", "bn", "scale"}
    assert {"frozen_by_loop", "frozen_by_call"} <= net.frozen
    assert net.members["act"].trainable is False and net.members["norm"].trainable is False


# values ------------------------------------------------------------------------

VALUES_SOURCE = """
import torch
from torch import nn
import torch.nn.functional as F

def step(model, batch, criterion, optimizer):
    net = nn.Linear(2, 2)
    out = model(batch)
    prob = torch.sigmoid(out)
    loss = criterion(prob, batch)
    other = F.cross_entropy(out, batch)
    cut = out.detach()
    number = loss.item()
    leaf = torch.zeros(3, requires_grad=True)
    moved = leaf.to("cpu")
    plain = torch.zeros(3)
    with torch.no_grad():
        frozen = model(batch)
    return net, out, prob, loss, other, cut, number, leaf, moved, plain, frozen, optimizer
"""


@pytest.mark.parametrize(
    "name, holds",
    [
        ("net", Holds.MODEL), ("out", Holds.ACTIVATION), ("prob", Holds.ACTIVATION),
        ("loss", Holds.LOSS), ("other", Holds.LOSS), ("cut", Holds.DETACHED), ("number", Holds.NUMBER),
        ("leaf", Holds.LEAF), ("moved", Holds.ACTIVATION), ("plain", Holds.NOTHING),
        ("frozen", Holds.DETACHED), ("optimizer", Holds.OPTIMIZER),
    ],
)
def test_what_names_hold(name, holds):
    facts = facts_of(VALUES_SOURCE)
    returned = facts.index.nodes(cst.Return)[0].value
    for element in returned.elements:
        if element.value.value == name:
            got = facts.values.holds(element.value)
            assert got & holds if holds else not got, got
            return
    raise AssertionError(name)


def test_a_projects_own_no_grad_wrapper_counts_as_maybe_disabled():
    facts = facts_of(
        """
        import torch
        from utils import smart_inference_mode, inference_context, timer

        @smart_inference_mode()
        def a(model, x):
            return model(x)

        def b(model, x):
            with inference_context():
                return model(x)

        def c(model, x):
            with timer():
                return model(x)
        """
    )
    disabled = {}
    for fn in facts.index.nodes(cst.FunctionDef):
        call = list(facts.index.descendants(fn.body, cst.Call))[-1]  # model(x)
        disabled[fn.name.value] = facts.grad_mode.is_disabled(call)
    assert disabled == {"a": True, "b": True, "c": False}


def test_a_function_rebound_wrapped_in_a_grad_mode_manager_runs_in_its_mode():
    facts = facts_of(
        """
        import torch
        from torch import inference_mode

        def evaluate(model, x):
            return model(x)

        evaluate = torch.no_grad()(evaluate)

        @torch.enable_grad()
        def attack(model, x):
            return model(x)

        attack = torch.no_grad()(attack)

        def predict(model, x):
            return model(x)

        fast_predict = torch.no_grad()(predict)

        def train(model, x):
            return model(x)

        train = timed(train)

        class Head(torch.nn.Module):
            def forward(self, x):
                return self.fc(x)

            forward = inference_mode()(forward)
        """
    )
    mode, setter, source = {}, {}, {}
    for fn in facts.index.nodes(cst.FunctionDef):
        call = list(facts.index.descendants(fn.body, cst.Call))[-1]
        mode[fn.name.value] = facts.grad_mode.mode_at(call)
        found = facts.grad_mode.function_setter(fn)
        setter[fn.name.value] = facts.module.code_for_node(found[0]) if found else None
        block = facts.grad_mode.disabled_by(call)
        source[fn.name.value] = facts.module.code_for_node(block).strip() if block is not None else None
    # The innermost decides: a decorator under the rebinding wins.
    assert mode == {"evaluate": Mode.DISABLED, "attack": Mode.ENABLED, "predict": None, "train": None, "forward": Mode.DISABLED}
    assert setter == {
        "evaluate": "torch.no_grad()", "attack": "torch.enable_grad()", "predict": None, "train": None,
        "forward": "inference_mode()",
    }
    assert source["evaluate"] == "evaluate = torch.no_grad()(evaluate)"
    assert source["forward"] == "forward = inference_mode()(forward)"


def test_functions_and_imports_are_not_models_whatever_their_name():
    facts = facts_of(
        """
        import torch
        from codecs import encoder

        def infer_encoder(item):
            return item

        def f(items, model):
            for item in items:
                infer_encoder(item)
                encoder(item)
                model(item)
        """
    )
    calls = {facts.module.code_for_node(c.func): c.func for c in facts.index.nodes(cst.Call)}
    assert not facts.values.holds(calls["infer_encoder"]) & Holds.MODEL
    assert not facts.values.holds(calls["encoder"]) & Holds.MODEL
    assert facts.values.holds(calls["model"]) & Holds.MODEL


def test_a_loop_body_sees_the_loop_target():
    facts = facts_of(
        """
        def clip(model):
            for p in model.parameters():
                p.grad.clamp_(-1, 1)
        """
    )
    read = [n for n in facts.index.nodes(cst.Name) if n.value == "p"][-1]
    assert facts.values.holds(read) & Holds.PARAM


# loss terms ----------------------------------------------------------------------

LOSS_TERMS = """
import torch
import torch.nn.functional as F

def step(model, loader, criterion, optimizer, scaler, device, alpha=0.1):
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        out = model(x)
        with torch.no_grad():
            frozen = model(x)
        weights = F.softmax(criterion(out.detach(), y), 0)
        main = criterion(out, y)
        term = ((frozen - y) ** 2).mean()
        loss = main + alpha * term
        loss += (weights * main).sum()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
"""


def _name_read(facts: Facts, name: str, index: int = 0) -> cst.Name:
    reads = facts.values.scope(facts.index.nodes(cst.FunctionDef)[0]).reads[name]
    return reads[index]


def test_plain_data_is_batches_targets_and_conversions_not_outputs():
    facts = facts_of(LOSS_TERMS)
    terms = LossTerms(facts)
    by_code = {facts.module.code_for_node(n): n for n in facts.index.order if isinstance(n, cst.BaseExpression)}
    assert terms.is_plain(_name_read(facts, "y", -1))  # a loop target over a loader, moved to a device
    assert terms.is_plain(by_code["out.detach()"])
    assert not terms.is_plain(_name_read(facts, "out", -1))  # a live model output
    assert not terms.is_plain(by_code["main"])  # a loss with a graph
    assert not terms.is_plain(by_code["(weights * main)"])


def test_a_graphless_term_grows_over_plain_data_and_reaches_backward_only_as_a_summand():
    facts = facts_of(LOSS_TERMS)
    terms = LossTerms(facts)
    code = facts.module.code_for_node
    frozen = _name_read(facts, "frozen")
    term = terms.term(frozen)
    assert code(term) == "((frozen - y) ** 2).mean()"
    assert terms.is_loss_shaped(term, frozen)
    backward = terms.backward_through_sum(term)
    assert backward is not None and code(backward) == "scaler.scale(loss).backward()"

    # `weights` multiplies a live loss: a stop-gradient weight, not a summand.
    detached = call_named(facts, "out.detach()")
    weight_term = terms.term(detached)
    assert code(weight_term) == "F.softmax(criterion(out.detach(), y), 0)"
    assert terms.is_loss_shaped(weight_term, detached)
    assert terms.backward_through_sum(weight_term) is None


def test_disabled_by_names_the_block_that_turns_autograd_off():
    facts = facts_of(LOSS_TERMS)
    frozen_call = [c for c in facts.index.nodes(cst.Call) if facts.module.code_for_node(c) == "model(x)"]
    assert facts.grad_mode.disabled_by(frozen_call[0]) is None
    block = facts.grad_mode.disabled_by(frozen_call[1])
    assert isinstance(block, cst.With)
    assert facts.module.code_for_node(block.items[0].item) == "torch.no_grad()"


def test_calling_a_class_builds_a_model_and_calling_a_model_runs_it():
    facts = facts_of(
        """
        import torch

        def run(Model: torch.nn.Module, G, envs, z):
            agent = Model(envs)
            fake = G(z)
            out = agent(z)
        """
    )
    holds = {facts.module.code_for_node(c): facts.values.holds(c) for c in facts.index.nodes(cst.Call)}
    assert holds["Model(envs)"] == Holds.MODEL
    assert holds["G(z)"] == Holds.ACTIVATION
    assert holds["agent(z)"] == Holds.ACTIVATION


def test_a_parameter_named_like_a_function_is_not_a_call_of_it():
    """`closure()` inside an optimizer's no_grad `step(self, closure)` calls
    the parameter (re-wrapped with enable_grad), not the `closure` a training
    function defines: that one runs with grad on."""
    facts = facts_of(
        """
        import torch

        class LBFGS(torch.optim.Optimizer):
            @torch.no_grad()
            def step(self, closure):
                closure = torch.enable_grad()(closure)
                return closure()

        def fit(model, optimizer, x, y):
            def closure():
                loss = (model(x) - y).pow(2).mean()
                loss.backward()
                return loss
            return optimizer.step(closure)
        """
    )
    assert not facts.grad_mode.is_disabled(call_named(facts, "model(x)"))


def test_class_passed_and_callers_through_parameters():
    """`model(x)` in a helper whose `model` parameter every call fills with
    the same module class of the file runs that class's `forward`; one such
    chain under `no_grad` is where the forward runs with autograd off."""
    facts = facts_of(
        """
        import torch
        from torch import nn

        class Net(nn.Module):
            def forward(self, x):
                return x

        def predict(model, x):
            return model(x)

        def evaluate(model, x):
            with torch.no_grad():
                return predict(model, x)

        def main(x):
            evaluate(Net(), x)
        """
    )
    forward = next(f for f in facts.index.nodes(cst.FunctionDef) if f.name.value == "forward")
    site = call_named(facts, "model(x)")
    assert site in facts.values.callers(forward)
    found = facts.values.caller_without_grad(forward)
    assert found is not None and found[0] is site


def test_stored_activations_method_outputs_and_flags_by_helpers():
    """What a class stores on `self` from its submodules' outputs is an
    activation; a method returning them gives activations at each position;
    a helper that calls `requires_grad_()` on its parameter makes the
    caller's tensor a leaf, also on the next pass of a loop."""
    facts = facts_of(
        """
        import torch
        from torch import nn

        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)

            def pair(self, a, b):
                return self.fc(a), self.fc(b).detach()

        class Holder(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = Encoder()
                self.emb, self.idx = self.encoder.pair(torch.zeros(4), torch.ones(4))

            def read(self):
                return self.emb.clone(), self.idx.clone()

        def flag(mask):
            mask.requires_grad_()

        def loop(n):
            m = torch.ones(3)
            for _ in range(n):
                v = m.view(-1)
                flag(m)
        """
    )
    holds = {facts.module.code_for_node(c): facts.values.holds(c) for c in facts.index.nodes(cst.Call)}
    assert holds["self.emb.clone()"] == Holds.ACTIVATION
    assert not holds["self.idx.clone()"] & Holds.ACTIVATION
    view = call_named(facts, "m.view(-1)")
    assert facts.values.holds(view.func.value) & Holds.LEAF


def test_values_made_only_from_new_tensors_never_had_a_graph():
    facts = facts_of(
        """
        import torch

        def f(model, x):
            a = torch.rand(3, 3)
            b = a + torch.ones_like(a) * 2
            c = b + model(x)
            d = torch.tensor(x.item())
        """
    )
    new = {facts.module.code_for_node(a.targets[0].target): facts.values.from_new_values(a.value) for a in facts.index.nodes(cst.Assign)}
    assert new == {"a": True, "b": True, "c": False, "d": False}
