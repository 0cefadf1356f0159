"""Intent and grad-mode facts the evaluation rules stand on: methods of the
file's classes called on other objects, literal arguments that rule a branch
out, models in eval mode for life or on one branch of a flag, and
`enable_grad()` inside inference mode."""

from __future__ import annotations

import textwrap

import libcst as cst

from detachlint.analysis import Facts
from detachlint.analysis.grad_mode import Mode


def facts_of(source: str) -> Facts:
    return Facts(cst.parse_module(textwrap.dedent(source)))


def call_named(facts: Facts, text: str) -> cst.Call:
    for call in facts.index.nodes(cst.Call):
        if facts.module.code_for_node(call) == text:
            return call
    raise AssertionError(f"no call {text!r}")


def function_named(facts: Facts, name: str) -> cst.FunctionDef:
    return next(f for f in facts.index.nodes(cst.FunctionDef) if f.name.value == name)


def test_methods_called_resolves_the_one_class_with_that_method():
    facts = facts_of(
        """
        import numpy as np
        from torch import nn

        class Net(nn.Module):
            def predict(self, x):
                return self(x)

        class Other:
            def run(self):
                pass

        class Another:
            def run(self):
                pass

        def use(model, x):
            model.predict(x)
            model.run()
            model.eval()
            np.mean(x)
        """
    )
    assert [f.name.value for f in facts.intent.methods_called(call_named(facts, "model.predict(x)"))] == ["predict"]
    assert facts.intent.methods_called(call_named(facts, "model.run()")) == []  # two classes define it
    assert facts.intent.methods_called(call_named(facts, "model.eval()")) == []  # nn.Module's own
    assert facts.intent.methods_called(call_named(facts, "np.mean(x)")) == []


def test_literal_arguments_rule_out_a_guarded_backward():
    facts = facts_of(
        """
        def run_epoch(model, loader, optimizer=None, train=True):
            for x in loader:
                loss = model(x).sum()
                if optimizer is not None and train:
                    loss.backward()

        def main(model, loader, opt):
            run_epoch(model, loader)
            run_epoch(model, loader, opt, train=False)
            run_epoch(model, loader, opt)
        """
    )
    helper = function_named(facts, "run_epoch")
    backward = call_named(facts, "loss.backward()")
    assert facts.intent.dead_for_call(backward, helper, call_named(facts, "run_epoch(model, loader)"))
    assert facts.intent.dead_for_call(backward, helper, call_named(facts, "run_epoch(model, loader, opt, train=False)"))
    assert not facts.intent.dead_for_call(backward, helper, call_named(facts, "run_epoch(model, loader, opt)"))


def test_an_early_return_on_a_literal_flag_rules_out_what_follows():
    facts = facts_of(
        """
        def step_loss(model, x, keep_graph=True):
            loss = model(x).sum()
            if not keep_graph:
                return loss.detach()
            return loss

        def main(model, x):
            step_loss(model, x)
            step_loss(model, x, keep_graph=False)
            step_loss(model, x, flag)
        """
    )
    helper = function_named(facts, "step_loss")
    cut, kept = [r for r in facts.index.nodes(cst.Return)]
    call = lambda text: call_named(facts, text)  # noqa: E731
    assert facts.intent.dead_for_call(kept, helper, call("step_loss(model, x, keep_graph=False)"))
    assert not facts.intent.dead_for_call(cut, helper, call("step_loss(model, x, keep_graph=False)"))
    assert facts.intent.dead_for_call(cut, helper, call("step_loss(model, x)"))
    assert not facts.intent.dead_for_call(kept, helper, call("step_loss(model, x)"))
    # A flag only the run decides rules out neither.
    assert not any(facts.intent.dead_for_call(r, helper, call("step_loss(model, x, flag)")) for r in (cut, kept))


def test_a_literal_flag_picks_the_branch_of_a_returned_conditional():
    facts = facts_of(
        """
        def step_loss(model, x, detach):
            loss = model(x).sum()
            return loss.detach() if detach else loss

        def main(model, x, flag):
            step_loss(model, x, detach=True)
            step_loss(model, x, False)
            step_loss(model, x, flag)
        """
    )
    helper = function_named(facts, "step_loss")
    (returned,) = [r.value for r in facts.index.nodes(cst.Return)]
    taken = lambda text: facts.module.code_for_node(facts.intent.branch_for_call(returned, helper, call_named(facts, text)))  # noqa: E731
    assert taken("step_loss(model, x, detach=True)") == "loss.detach()"
    assert taken("step_loss(model, x, False)") == "loss"
    assert taken("step_loss(model, x, flag)") == "loss.detach() if detach else loss"


def test_eval_for_life_needs_init_switch_and_no_training():
    facts = facts_of(
        """
        from torch import nn

        class Wrapper(nn.Module):
            def __init__(self, net):
                super().__init__()
                self.net = net
                self.eval()

            def run(self, x):
                return self.net(x)

        class Trains(nn.Module):
            def __init__(self, net):
                super().__init__()
                self.net = net
                self.net.eval()

            def fit(self, x):
                self.net.train()
                return self.net(x)
        """
    )
    assert facts.intent.eval_for_life("self.net", call_named(facts, "self.net(x)"))
    trains = [c for c in facts.index.nodes(cst.Call) if facts.module.code_for_node(c) == "self.net(x)"][1]
    assert not facts.intent.eval_for_life("self.net", trains)


def test_eval_branch_and_gradients_only_on_the_other_branch():
    facts = facts_of(
        """
        def train_and_valid(model, loader, optimizer, is_train=True):
            if is_train:
                model.train()
            else:
                model.eval()
            for x in loader:
                loss = model(x).sum()
                if is_train:
                    loss.backward()
                    optimizer.step()
        """
    )
    scope = function_named(facts, "train_and_valid")
    loop = facts.index.nodes(cst.For)[0]
    assert facts.intent.eval_branch("model", loop, scope) == ("is_train", False)
    assert facts.intent.gradients_only_when(loop, scope, ("is_train", True))
    assert facts.intent.condition_of(cst.parse_expression("opt is not None")) == ("opt is None", False)


def test_enable_grad_does_not_lift_inference_mode():
    facts = facts_of(
        """
        import torch

        class Lit(torch.nn.Module):
            def step(self, x):
                with torch.enable_grad():
                    out = self(x)
                return out

        def validate(model, x):
            with torch.no_grad():
                with torch.enable_grad():
                    a = model(x)

        def test(model, x):
            with torch.inference_mode():
                with torch.enable_grad():
                    b = model(x)
                model.step(x)
        """
    )
    assert facts.grad_mode.mode_at(call_named(facts, "model(x)")) is Mode.ENABLED
    inside = [c for c in facts.index.nodes(cst.Call) if facts.module.code_for_node(c) == "model(x)"][1]
    assert facts.grad_mode.mode_at(inside) is Mode.DISABLED
    # `model.step(x)` from another object is a call site of `Lit.step`, run in inference mode.
    assert facts.grad_mode.mode_at(call_named(facts, "self(x)")) is Mode.DISABLED


def test_a_template_methods_call_runs_the_overrides_of_the_subclasses():
    facts = facts_of(
        """
        class Base:
            def fit(self, batches):
                return [self.step(b) for b in batches]

            def step(self, batch):
                \"\"\"One step.\"\"\"
                raise NotImplementedError(f"{type(self).__name__} must define step")

        class Sgd(Base):
            def step(self, batch):
                return batch * 2

        class Adam(Sgd):
            def step(self, batch):
                return batch * 3

        class Unrelated:
            def step(self, batch):
                return batch
        """
    )
    call = call_named(facts, "self.step(b)")
    owners = [facts.index.parent(facts.index.parent(f)).name.value for f in facts.intent.helpers_called(call)]
    # The base only raises: both subclasses' overrides may run, no other class's.
    assert owners == ["Sgd", "Adam"]


def test_a_base_that_does_the_work_runs_its_own_definition():
    facts = facts_of(
        """
        class Base:
            def fit(self, batches):
                return [self.step(b) for b in batches]

            def step(self, batch):
                return batch

        class Sub(Base):
            def step(self, batch):
                return batch * 2
        """
    )
    (function,) = facts.intent.helpers_called(call_named(facts, "self.step(b)"))
    assert facts.index.parent(facts.index.parent(function)).name.value == "Base"


def test_abstract_bodies():
    from detachlint.analysis.intent import is_abstract

    facts = facts_of(
        """
        def a(self):
            raise NotImplementedError

        def b(self):
            '''Docs.'''
            ...

        def c(self):
            pass

        def d(self):
            raise ValueError("no")

        def e(self):
            return 1

        def f(self): raise NotImplementedError()
        """
    )
    assert {name: is_abstract(function_named(facts, name)) for name in "abcdef"} == {
        "a": True, "b": True, "c": True, "d": False, "e": False, "f": True,
    }
