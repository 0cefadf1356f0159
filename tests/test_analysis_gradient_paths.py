"""Gradient-path facts DL201 stands on: tuple returns followed element by
element, members of the file's own classes followed through their `forward`,
helper methods that are no outputs of their own, parameters a function always
cuts, deep copies, and gradients handed over by hand."""

from __future__ import annotations

import textwrap

import libcst as cst

from detachlint.analysis import Facts
from detachlint.analysis.gradient_paths import copied_module


def facts_of(source: str) -> Facts:
    return Facts(cst.parse_module(textwrap.dedent(source)))


def function_named(facts: Facts, name: str) -> cst.FunctionDef:
    return next(f for f in facts.index.nodes(cst.FunctionDef) if f.name.value == name)


QUANTIZER = """
    import torch
    from torch import nn

    class Quantizer(nn.Module):
        def __init__(self):
            super().__init__()
            self.codebook = nn.Embedding(8, 4)

        def forward(self, x):
            ids = torch.cdist(x, self.codebook.weight).argmin(-1)
            codes = self.codebook(ids)
            return x + (codes - x).detach(), codes, ids

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Linear(16, 4)
            self.vq = Quantizer()

        def forward(self, x):
            z_q, codes, _ = self.vq(self.encoder(x))
            return z_q
"""


def test_tuple_returns_are_followed_element_by_element():
    facts = facts_of(QUANTIZER)
    quantizer = facts.modules.classes["Quantizer"]
    summary = facts.gradient_paths.summary(quantizer, "forward")
    assert summary.positions is not None and len(summary.positions) == 3
    assert "codebook" in summary.positions[1]
    assert summary.positions[2] == frozenset()  # argmin: integer indices


def test_member_of_a_file_class_is_cut_off_through_its_forward():
    facts = facts_of(QUANTIZER)
    model = facts.modules.classes["Model"]
    found = facts.gradient_paths.cut_off_members(model)
    assert [members for _, members in found] == [["vq"]]
    assert facts.line_of(found[0][0]) == 13


def test_helper_only_forward_calls_is_no_output():
    facts = facts_of("""
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(4, 4)

            def adjacency(self, x):
                return self.proj(x)

            def forward(self, x):
                return x @ self.adjacency(x).detach()

            def groups(self):
                return [{"params": self.proj.parameters()}]

        def evaluate(net, x):
            return net.forward(x)
    """)
    net = facts.modules.classes["Net"]
    assert "proj" not in facts.gradient_paths.reaches_output(net)


def test_parameter_a_function_always_cuts():
    facts = facts_of("""
        import torch

        class Env:
            def log_probs(self, logits, actions):
                n = torch.arange(logits.shape[0])
                logits = logits.clone().detach()
                return torch.log_softmax(logits, -1)[n, actions]

            def masked(self, logits):
                return logits.masked_fill(logits.detach() < 0, 0.0)
    """)
    paths = facts.gradient_paths
    assert set(paths.cut_parameters(function_named(facts, "log_probs"))) == {"logits"}
    assert paths.cut_parameters(function_named(facts, "masked")) == {}


def test_deep_copies_and_gradients_moved_by_hand():
    facts = facts_of("""
        import copy
        from copy import deepcopy

        def fomaml(model, fast):
            clone = deepcopy(model)
            for p, q in zip(model.parameters(), fast.parameters()):
                p.grad = q.grad
            return copy.copy(clone)
    """)
    calls = {facts.module.code_for_node(c): c for c in facts.index.nodes(cst.Call)}
    assert facts.module.code_for_node(copied_module(facts.names, calls["deepcopy(model)"])) == "model"
    assert copied_module(facts.names, calls["copy.copy(clone)"]) is None
    assert facts.gradient_paths.moves_gradients_by_hand(function_named(facts, "fomaml"))
