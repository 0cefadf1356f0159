"""Facts followed across the file's calls (`analysis/across_calls.py`)."""

from __future__ import annotations

import textwrap

import libcst as cst

from detachlint.analysis import Facts, Holds


def facts_of(source: str) -> Facts:
    return Facts(cst.parse_module(textwrap.dedent(source)))


def node(facts: Facts, kind, text: str):
    for found in facts.index.nodes(kind):
        if facts.module.code_for_node(found) == text:
            return found
    raise AssertionError(f"no {kind.__name__} {text!r}")


def backward_target(facts: Facts, line: int) -> cst.BaseExpression:
    for call in facts.index.nodes(cst.Call):
        target = facts.values.backward_target(call)
        if target is not None and facts.line_of(call) == line:
            return target
    raise AssertionError(f"no backward on line {line}")


TRAINER = """
import torch
from torch import nn

class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)
        self.ce = nn.CrossEntropyLoss()

    def loss(self, x, y, empty):
        if empty:
            loss = torch.tensor(0.0)
        else:
            loss = self.ce(self.fc(x), y)
        return loss

    def copied(self, x, y):
        losses = {}
        losses["cls"] = self.ce(torch.tensor(self.fc(x)), y)
        return losses

class Trainer:
    def __init__(self, head):
        self.head = head

    def step(self, x, y, empty):
        self.head.loss(x, y, empty).backward()
        sum(self.head.copied(x, y).values()).backward()

Trainer(Head()).step(torch.randn(2, 4), torch.tensor([0, 1]), False)
"""


def test_instance_class_follows_constructor_arguments_into_members():
    facts = facts_of(TRAINER)
    receiver = node(facts, cst.Attribute, "self.head")
    assert facts.values.across_calls.instance_class(receiver).name.value == "Head"
    call = node(facts, cst.Call, "self.head.loss(x, y, empty)")
    assert [f.name.value for f in facts.values.across_calls.callees(call)] == ["loss"]


def test_without_graph_through_containers_and_methods_and_on_a_branch():
    facts = facts_of(TRAINER)
    across = facts.values.across_calls
    assert facts.values.computed_without_graph(backward_target(facts, 29))
    branch_loss = backward_target(facts, 28)
    assert not facts.values.computed_without_graph(branch_loss)
    block = across.without_graph_on_branch(branch_loss)
    assert isinstance(facts.index.parent(block), cst.If)


def test_factory_filled_with_outputs_is_not_graph_free():
    facts = facts_of(
        """
        import torch

        def step(model, y):
            out = torch.zeros(2, 3)
            out[:, 0] = model(y)
            out.sum().backward()
        """
    )
    assert not facts.values.computed_without_graph(backward_target(facts, 7))


def test_a_list_a_nested_function_fills_is_not_graph_free():
    facts = facts_of(
        """
        import torch

        def hooked(model, x):
            feats = []
            model.register_forward_hook(lambda m, i, out: feats.append(out))
            model(x)
            torch.stack(feats).sum().backward()

        def collected(outputs):
            tensors = []
            def gather(out):
                tensors.append(out)
            gather(outputs)
            torch.autograd.backward(tensors)

        def shadowed(outputs):
            tensors = []
            def gather(tensors):
                tensors.append(outputs)
            torch.autograd.backward(tensors)
        """
    )
    assert not facts.values.computed_without_graph(backward_target(facts, 8))
    assert not facts.values.computed_without_graph(backward_target(facts, 15))
    # The nested function's `tensors` is its own parameter: the list stays empty.
    assert facts.values.computed_without_graph(backward_target(facts, 21))
    collected = next(f for f in facts.index.nodes(cst.FunctionDef) if f.name.value == "collected")
    assert list(facts.values.scope(collected).closure_reads) == ["tensors"]


def test_holds_of_parameters_dict_entries_and_star_arguments():
    facts = facts_of(
        """
        import torch

        def project(means):
            means2d = means[:, :2] * 2
            return {"means2d": means2d}

        def read(info):
            return info["means2d"].grad

        def record(t):
            return t.grad

        def traced(fn):
            def wrapped(*args):
                return [record(a) for a in args]
            return wrapped

        class Runner:
            def __init__(self):
                self.splats = torch.nn.ParameterDict({"means": torch.nn.Parameter(torch.randn(4, 3))})

            def step(self):
                return read(project(self.splats["means"])), self.splats["means"].grad

        x = torch.ones(3, requires_grad=True) + 1
        traced_fn = traced(torch.sin)
        traced_fn(x)
        """
    )
    across = facts.values.across_calls
    assert across.holds(node(facts, cst.Subscript, 'info["means2d"]')) == Holds.ACTIVATION
    assert across.holds(node(facts, cst.Subscript, 'self.splats["means"]')) == Holds.PARAM
    record = node(facts, cst.Attribute, "t.grad")
    assert across.holds(record.value) & Holds.ACTIVATION


def test_flagged_params_through_generators_and_star_forwarding():
    facts = facts_of(
        """
        import torch

        def _each(items):
            for item in items:
                yield item

        def freeze(*items):
            for param in _each(items):
                param.requires_grad_(False)

        def frozen(*items):
            return freeze(*items)

        def unfreeze(t):
            t.requires_grad_(True)

        delta = 2 * torch.zeros(3, requires_grad=True)
        frozen(delta)
        """
    )
    across = facts.values.across_calls
    functions = {f.name.value: f for f in facts.index.nodes(cst.FunctionDef)}
    assert across.flagged_params(functions["freeze"]) == {"items": True}
    assert across.flagged_params(functions["frozen"]) == {"items": True}
    assert across.flagged_params(functions["unfreeze"]) == {}
    call = node(facts, cst.Call, "frozen(delta)")
    assert [facts.module.code_for_node(a) for a in across.flagged_arguments(call)] == ["delta"]
