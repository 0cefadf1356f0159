"""Hook captures: what forward hooks store detached on an object, read back
as an attribute, a property or a dict of lists, and the loss terms that
have no graph because of them."""

from __future__ import annotations

import textwrap

import libcst as cst

from detachlint.analysis import Facts
from detachlint.analysis.loss_terms import LossTerms


def facts_of(source: str) -> Facts:
    return Facts(cst.parse_module(textwrap.dedent(source)))


def attribute_reads(facts: Facts, attribute: str) -> list:
    return [a for a in facts.index.nodes(cst.Attribute) if a.attr.value == attribute and not _stored(facts, a)]


def _stored(facts: Facts, node: cst.CSTNode) -> bool:
    return isinstance(facts.index.parent(node), cst.AssignTarget)


def dead_terms(facts: Facts) -> dict:
    """summand code -> lines of the hook captures that leave it without graph."""
    found = {}
    for call in facts.index.nodes(cst.Call):
        target = facts.values.backward_target(call)
        if target is None:
            continue
        for summand in facts.shared("loss_terms", LossTerms).summands(target):
            captures = facts.values.across_calls.cut_by_hook_captures(summand.expr)
            found[facts.module.code_for_node(summand.expr)] = [facts.line_of(c.cut) for c in captures]
    return found


RECORDER = """
    from collections import defaultdict
    from functools import partial

    class Recorder:
        def __init__(self):
            self._store = defaultdict(list)

        @property
        def kept(self):
            return self._store

        def __call__(self, module, inputs, output, key=None):
            self._store[key].append(output.detach())

        def reset(self):
            self._store = defaultdict(list)

    class Probe:
        def __init__(self, net):
            self.recorder = Recorder()
            for key, layer in net.named_children():
                layer.register_forward_hook(partial(self.recorder, key=key))

        def read(self):
            return self.recorder.kept
"""


def test_callable_instance_through_partial_read_through_a_property():
    facts = facts_of(RECORDER)
    hooks = facts.values.across_calls.hook_captures
    [capture] = hooks.captures
    assert capture.attribute == "_store" and capture.forward and capture.hook.name.value == "__call__"
    [read] = attribute_reads(facts, "kept")
    assert hooks.captured(read) == [capture]


def test_an_attribute_also_stored_with_its_graph_is_no_capture():
    mixed = facts_of(RECORDER.replace(
        "def reset(self):\n            self._store = defaultdict(list)",
        "def reset(self, value):\n            self._store = value",
    ))
    assert mixed.values.across_calls.hook_captures.captures
    [read] = attribute_reads(mixed, "kept")
    assert mixed.values.across_calls.hook_captures.captured(read) == []


GRADCAM = """
    import torch
    import torch.nn.functional as F

    class Saliency:
        def __init__(self, model, layer):
            self.model = model
            self.layer = layer

        def __enter__(self):
            def keep_output(module, inputs, output):
                self.acts = output.detach()

            def keep_grad(module, grad_in, grad_out):
                self.grads = grad_out[0].detach()

            self.h1 = self.layer.register_forward_hook(keep_output)
            self.h2 = self.layer.register_full_backward_hook(keep_grad)
            return self

        def __exit__(self, *exc):
            self.h1.remove()
            self.h2.remove()

        def __call__(self, x, with_logits=False):
            logits = self.model(x)
            logits.max(1)[0].sum().backward(retain_graph=True)
            with torch.no_grad():
                cam = F.relu((self.grads.mean((2, 3), keepdim=True) * self.acts).sum(1))
            return (cam, logits) if with_logits else cam

    class Trainer:
        def __init__(self, model, optimizer):
            self.model = model
            self.optimizer = optimizer

        def losses(self, x, y):
            with Saliency(self.model, self.model.features) as saliency:
                cam = saliency(x)
            logits = self.model(x)
            return F.cross_entropy(logits, y) + 0.1 * cam.pow(2).mean()

        def step(self, x, y):
            loss = self.losses(x, y)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
"""


def test_a_term_built_from_a_forward_capture_is_dead_backward_captures_are_plain_data():
    facts = facts_of(GRADCAM)
    kinds = {c.attribute: c.forward for c in facts.values.across_calls.hook_captures.captures}
    assert kinds == {"acts": True, "grads": False}
    terms = dead_terms(facts)
    assert terms["cam.pow(2)"] == [12]
    assert terms["F.cross_entropy(logits, y)"] == []


def test_the_object_of_a_with_statement_is_an_instance_of_its_class_when_enter_returns_self():
    facts = facts_of(GRADCAM)
    [call] = [c for c in facts.index.nodes(cst.Call) if isinstance(c.func, cst.Name) and c.func.value == "saliency"]
    assert [f.name.value for f in facts.values.across_calls.callees(call)] == ["__call__"]


def test_a_capture_used_as_a_target_next_to_a_live_prediction_leaves_the_term_alive():
    facts = facts_of("""
        import torch.nn.functional as F
        from torch import nn

        class Tap:
            def __init__(self, layer):
                layer.register_forward_hook(self.keep)

            def keep(self, module, inputs, output):
                self.value = output.detach()

        class Pair(nn.Module):
            def __init__(self):
                super().__init__()
                self.teacher = nn.Linear(4, 4)
                self.student = nn.Linear(4, 4)
                self.tap = Tap(self.teacher)

            def loss(self, x):
                self.teacher(x)
                return F.mse_loss(self.student(x), self.tap.value) + self.student(x).pow(2).mean()

        def train(model, optimizer, x):
            loss = model.loss(x)
            loss.backward()
            optimizer.step()

        model = Pair()
        train(model, None, None)
    """)
    assert facts.values.across_calls.hook_captures.captures
    assert all(lines == [] for lines in dead_terms(facts).values())


def test_an_undetached_capture_is_not_one():
    facts = facts_of("""
        class Tap:
            def __init__(self, layer):
                layer.register_forward_hook(self.keep)

            def keep(self, module, inputs, output):
                self.value = output
    """)
    assert facts.values.across_calls.hook_captures.captures == []


def test_summands_follow_a_helper_that_returns_another_helpers_accumulated_loss():
    facts = facts_of("""
        import torch.nn.functional as F

        class Learner:
            def criterion(self, out, y, extra):
                loss = F.cross_entropy(out, y)
                loss = loss + 0.5 * extra.mean()
                return loss

            def compute(self, x, y, extra):
                return self.criterion(self.model(x), y, extra)

            def step(self, x, y, extra):
                loss = self.compute(x, y, extra)
                loss.backward()
    """)
    [call] = [c for c in facts.index.nodes(cst.Call) if facts.values.backward_target(c) is not None]
    summands = facts.shared("loss_terms", LossTerms).summands(facts.values.backward_target(call))
    assert sorted(facts.module.code_for_node(s.expr) for s in summands) == ["F.cross_entropy(out, y)", "extra"]
