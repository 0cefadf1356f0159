"""Views (`analysis/views.py`) and the loss-term facts DL202 adds on
`analysis/loss_terms.py`: detached losses, straight-through sums,
configuration weights, loss helpers without parameters."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from detachlint.analysis import Facts
from detachlint.analysis.loss_terms import LossTerms
from detachlint.analysis.views import Views


def facts_of(source: str) -> Facts:
    return Facts(cst.parse_module(textwrap.dedent(source)))


def detach_receivers(facts: Facts):
    """The receiver of every `x.detach_()`, by name."""
    found = {}
    for call in facts.index.nodes(cst.Call):
        if isinstance(call.func, cst.Attribute) and call.func.attr.value == "detach_":
            found[call.func.value.value] = call.func.value
    return found


VIEWS = """
import torch
from torch import nn

def to_matrix(q):
    m = torch.stack((q, q), -1)
    return m.reshape(q.shape[:-1] + (2, 2))

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.to_matrix = to_matrix
        self.rnn = nn.GRU(4, 4)

    def forward(self, x, q, loss, params):
        out, hidden = self.rnn(x)
        rotations = self.to_matrix(q)
        last = out[:, -1]
        first = out[0]
        left, right = out.chunk(2, dim=-1)
        pair = (out, hidden)
        a, b = pair
        weight = torch.pow(out, 2)
        for g in torch.autograd.grad(loss, params):
            g.detach_()
        grads = torch.autograd.grad(loss, params)
        for h in grads:
            h.detach_()
        for state in hidden:
            state.detach_()
        rotations.detach_()
        last.detach_()
        first.detach_()
        left.detach_()
        a.detach_()
        weight.detach_()
        hidden.detach_()
"""


@pytest.mark.parametrize(
    "name, origin",
    [
        ("rotations", "m.reshape(q.shape[:-1] + (2, 2))"),  # through a function stored on self
        ("last", "out[:, -1]"),
        ("left", "out.chunk(2, dim=-1)"),
        ("g", "torch.autograd.grad(loss, params)"),
        ("h", "torch.autograd.grad(loss, params)"),  # through the name the grads were stored in
        ("first", None),  # `out[0]` may be an element of a tuple
        ("a", None),  # unpacked from a tuple literal's name
        ("weight", None),  # an operation's result
        ("hidden", None),
        ("state", None),  # iterating an unknown value
    ],
)
def test_view_origin_names_the_expression_that_makes_a_view(name, origin):
    facts = facts_of(VIEWS)
    found = Views(facts).view_origin(detach_receivers(facts)[name])
    assert (facts.module.code_for_node(found) if found is not None else None) == origin


DETACHED_LOSSES = """
import torch
import torch.nn.functional as F

class Memory:
    def memory_loss(self, feats, labels):
        return feats.sum()

class Quantizer(torch.nn.Module):
    def codebook_loss(self, z):
        return z.sum()

def step(model, x, y, criterion, memory, quantizer, optimizer, args):
    out = model(x)
    ce = criterion(out, y)
    soft = criterion(out / 2, y)
    detached = criterion(out, y).detach() * args.beta
    swapped = ce.detach() + soft - soft.detach()
    mem = memory.memory_loss(out.detach(), y)
    code = quantizer.codebook_loss(out.detach())
    loss = ce + detached + swapped + args["w"] * mem + code
    loss.backward()
"""


def test_detached_losses_and_straight_through_sums():
    facts = facts_of(DETACHED_LOSSES)
    terms = LossTerms(facts)
    detaches = {
        facts.module.code_for_node(c): c
        for c in facts.index.nodes(cst.Call)
        if isinstance(c.func, cst.Attribute) and c.func.attr.value == "detach"
    }
    whole = detaches["criterion(out, y).detach()"]
    assert terms.is_detached_loss(whole, whole.func.value)
    swapped = detaches["ce.detach()"]
    assert not terms.is_detached_loss(swapped, swapped.func.value)  # straight-through


def test_loss_helpers_without_parameters_are_loss_calls_and_settings_are_scales():
    facts = facts_of(DETACHED_LOSSES)
    terms = LossTerms(facts)
    calls = {facts.module.code_for_node(c): c for c in facts.index.nodes(cst.Call)}
    assert terms.is_loss_call(calls["memory.memory_loss(out.detach(), y)"])
    assert not terms.is_loss_call(calls["quantizer.codebook_loss(out.detach())"])  # a module's own loss
    mem = calls["memory.memory_loss(out.detach(), y)"]
    backward = terms.backward_through_sum(terms.term(mem))
    assert backward is not None  # `args["w"] * mem` is a weighted summand


SAVED = """
import torch
from torch import nn

class Bank(nn.Module):
    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder
        self.register_buffer("queue", torch.randn(4, 8))

    def _enqueue(self, keys):
        self.queue[:, :2] = keys.T

    def forward(self, x, keys, bank):
        q = self.encoder(x)
        saved = torch.einsum("nc,ck->nk", [q, self.queue.detach()])
        product = q @ bank.detach().T
        joined = torch.cat([q, bank.detach()])
        self._enqueue(keys)
        bank[0] = 1
        return saved + product, joined
"""


def test_products_save_their_operands_and_later_edits_are_found():
    from detachlint.analysis.saved_tensors import SavedTensors

    facts = facts_of(SAVED)
    saved = SavedTensors(facts)
    code = facts.module.code_for_node
    detaches = [
        c for c in facts.index.nodes(cst.Call) if isinstance(c.func, cst.Attribute) and c.func.attr.value == "detach"
    ]
    operations = [saved.saving_operation(d) for d in detaches]
    assert [code(o) if o is not None else None for o in operations] == [
        'torch.einsum("nc,ck->nk", [q, self.queue.detach()])',
        "q @ bank.detach().T",
        None,  # a concatenation saves nothing
    ]
    assert all(saved.needed_later(o) for o in operations[:2])
    assert [e.text for e in saved.edits_after("self.queue", operations[0])] == ["self.queue[...] = ..."]
    assert [e.text for e in saved.edits_after("bank", operations[1])] == ["bank[...] = ..."]


STATES = """
import torch

class DecoderState:
    def detach(self):
        for h in self._all:
            h.detach_()

class RNNDecoderState(DecoderState):
    def __init__(self, hidden, size):
        self.hidden = (hidden,)
        self.input_feed = hidden.new_zeros(hidden.size(1), size).unsqueeze(0)

    @property
    def _all(self):
        return self.hidden + (self.input_feed,)

class CopiedState:
    def __init__(self, hidden):
        self.hidden = (hidden,)
        self.feed = hidden[0].clone()

    def detach(self):
        for h in self.hidden + (self.feed,):
            h.detach_()
        for h in self.states:
            h.detach_()

    @property
    def states(self):
        return [self.feed] + list(self.hidden)
"""


def test_a_view_a_subclass_keeps_among_the_tensors_a_base_method_iterates():
    facts = facts_of(STATES)
    loops = [loop for loop in facts.index.nodes(cst.For)]
    views = facts.shared("views", Views)
    element, view = views.held_view(loops[0])
    assert facts.module.code_for_node(element) == "self.input_feed"
    assert facts.module.code_for_node(view).endswith(".unsqueeze(0)")
    # A class whose held tensors are copies: nothing to report, also
    # through a property and for a loop over an expression.
    assert views.held_view(loops[1]) is None
    assert views.held_view(loops[2]) is None
