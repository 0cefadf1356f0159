"""The verifier's caller chain and the file's other call sites: a function
that calls the finding's method on a local bound to an instance of its class
or of a subclass (`state.detach()` with `state = GRUState(...)`) reaches it;
and when the file's first call of the code does not reach the finding's line
(a baseline model that never takes the branch), its next calls are run, as
the file makes them, before any `if` is forced."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from detachlint.engine import lint_source
from detachlint.registry import load_rules
from detachlint.verify.extract import build_spec

pytest.importorskip("torch")  # the verifier's extra

from detachlint.verify.runtime.verdict import PROBES, run_probe  # noqa: E402

RULES = load_rules()


def _finding(tmp_path: Path, source: str, code: str, marker: str):
    source = textwrap.dedent(source).lstrip("\n")
    path = tmp_path / "user.py"
    path.write_text(source, encoding="utf-8")
    line = next(n for n, text in enumerate(source.splitlines(), 1) if marker in text)
    found = [f for f in lint_source(path.read_bytes(), str(path), [RULES[code]]).findings if f.line == line]
    assert found, f"no {code} finding on line {line}"
    return found[0], source


def _verify(finding, source):
    spec = build_spec(finding, source)
    return spec, run_probe(PROBES[finding.code], spec, 30)


TRUNCATED_BPTT = '''
import torch
from torch import nn


class RecurrentState:
    """Carries a recurrent layer's state between truncated-BPTT windows."""

    def detach(self):
        for t in self.tensors:
            t.detach_()


class GRUState(RecurrentState):
    def __init__(self, hidden):
        self.hidden = hidden
        self.last = hidden[-1].unsqueeze(0)

    @property
    def tensors(self):
        return (self.hidden, self.last)

    def update(self, hidden):
        self.hidden = hidden
        self.last = hidden[-1].unsqueeze(0)


class CharRNN(nn.Module):
    def __init__(self, vocab=16, width=12):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.rnn = nn.GRU(width, width)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens, state):
        out, hidden = self.rnn(self.embed(tokens), state.hidden)
        state.update(hidden)
        return self.head(out), state


def fit(model, optimizer, stream, window=4):
    state = GRUState(torch.zeros(1, stream.size(1), 12))
    for start in range(0, stream.size(0) - 1, window):
        chunk = stream[start:start + window + 1]
        logits, state = model(chunk[:-1], state)
        loss = nn.functional.cross_entropy(logits.flatten(0, 1), chunk[1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        state.detach()


if __name__ == "__main__":
    model = CharRNN()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    stream = torch.randint(0, 16, (17, 3))
    fit(model, optimizer, stream)
'''


def test_a_function_calling_the_method_on_a_local_of_a_subclass_is_the_call_site(tmp_path):
    finding, source = _finding(tmp_path, TRUNCATED_BPTT, "DL205", "t.detach_()")
    spec = build_spec(finding, source)
    assert spec["call_site"]["call"] == "fit(model, optimizer, stream)"
    assert spec["call_site"]["chain"] is True
    # `meter.detach()` instead is another class's method: `fit` then does not run `RecurrentState.detach`.
    unrelated = TRUNCATED_BPTT.replace(
        "class CharRNN(nn.Module):",
        "class Meter:\n    def detach(self):\n        self.total = 0.0\n\n\nclass CharRNN(nn.Module):",
    ).replace("    state = GRUState(torch.zeros(1, stream.size(1), 12))\n", "    state = GRUState(torch.zeros(1, stream.size(1), 12))\n    meter = Meter()\n").replace(
        "        state.detach()\n", "        meter.detach()\n"
    )
    finding, source = _finding(tmp_path, unrelated, "DL205", "t.detach_()")
    assert "call_site" not in build_spec(finding, source)


def test_detach_in_place_on_the_state_view_confirms_through_the_files_call(tmp_path):
    finding, source = _finding(tmp_path, TRUNCATED_BPTT, "DL205", "t.detach_()")
    _, result = _verify(finding, source)
    assert (result["status"], result.get("basis")) == ("confirmed", "user-code"), result
    assert "raised RuntimeError: Can't detach views in-place" in result["evidence"]
    assert "`fit(model, optimizer, stream)` (line 56)" in result["evidence"]


CACHED_QUERIES = '''
import torch
from torch import nn
import torch.nn.functional as F


class TextEncoder(nn.Module):
    def __init__(self, vocab=30, width=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.proj = nn.Linear(width, width)

    def forward(self, ids):
        return self.proj(self.embed(ids).mean(1))

    @torch.no_grad()
    def embed_cached(self, ids):
        return self.proj(self.embed(ids).mean(1))


class DualEncoder(nn.Module):
    def __init__(self, encoder, cache_queries=False):
        super().__init__()
        self.encoder = encoder
        self.cache_queries = cache_queries

    def encode_query(self, ids):
        if not self.cache_queries:
            reps = self.encoder(ids)
        else:
            reps = self.encoder.embed_cached(ids)
        return F.normalize(reps, dim=-1)

    def forward(self, queries, docs):
        q = self.encode_query(queries)
        d = self.encode_query(docs)
        scores = q @ d.T / 0.05
        return F.cross_entropy(scores, torch.arange(scores.size(0)))


def fit(model, pairs, lr=1e-3):
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    for queries, docs in pairs:
        loss = model(queries, docs)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    pairs = [(torch.randint(0, 30, (4, 6)), torch.randint(0, 30, (4, 6))) for _ in range(2)]
    baseline = DualEncoder(TextEncoder())
    fit(baseline, pairs)
    cached = DualEncoder(TextEncoder(), cache_queries=True)
    fit(cached, pairs)
'''


def test_the_files_next_call_sites_go_along_with_the_first(tmp_path):
    finding, source = _finding(tmp_path, CACHED_QUERIES, "DL303", "reps = self.encoder.embed_cached(ids)")
    spec = build_spec(finding, source)
    assert spec["call_site"]["call"] == "fit(baseline, pairs)"
    (other,) = spec["call_site"]["alternatives"]
    assert (other["call"], other["line"]) == ("fit(cached, pairs)", 54)
    assert any("cached = DualEncoder(TextEncoder(), cache_queries=True)" in b["text"] for b in other["blocks"])


def test_the_second_call_takes_the_no_grad_branch_and_its_backward_raises(tmp_path):
    finding, source = _finding(tmp_path, CACHED_QUERIES, "DL303", "reps = self.encoder.embed_cached(ids)")
    _, result = _verify(finding, source)
    assert (result["status"], result.get("basis")) == ("confirmed", "user-code"), result
    assert "raised RuntimeError: element 0 of tensors does not require grad" in result["evidence"]
    assert "`fit(cached, pairs)` (line 54)" in result["evidence"]
    # Both calls train the live encoder: no call of the file reaches the line, nothing is confirmed.
    neither = CACHED_QUERIES.replace("cache_queries=True)", "cache_queries=False)")
    finding, source = _finding(tmp_path, neither, "DL303", "reps = self.encoder.embed_cached(ids)")
    _, result = _verify(finding, source)
    assert result["status"] != "confirmed", result


# A correct captioning step (`PackedSequence.data` is a field, not a cut; the
# targets are labels), called twice by the file. A finding saying the targets
# line is a detached prediction, as an older DL202 reported it, is refuted
# only once each of the file's calls refutes it. `decoder.train()` is no call
# of the function `train`.
from test_verify_honesty import PACKED_TARGETS  # noqa: E402 - the honesty case's correct captioning step

PACKED_TWICE = (
    textwrap.dedent(PACKED_TARGETS)
    .lstrip("\n")
    .replace("def train_step(", "def train(")
    .replace("    scores = decoder(captions[:, :-1])", "    decoder.train()\n    scores = decoder(captions[:, :-1])")
    .replace(
        "print(train_step(decoder, optimizer, nn.CrossEntropyLoss(), captions, [6, 5, 4, 3]))",
        "train(decoder, optimizer, nn.CrossEntropyLoss(), captions, [6, 5, 4, 3])\n"
        "train(decoder, optimizer, nn.CrossEntropyLoss(), torch.randint(0, 12, (2, 5)), [4, 4])",
    )
)


def test_a_refutation_stands_when_each_of_the_files_calls_refutes(tmp_path):
    from detachlint.finding import Finding

    source = PACKED_TWICE
    path = tmp_path / "user.py"
    path.write_text(source, encoding="utf-8")
    lines = source.splitlines()
    line = next(n for n, text in enumerate(lines, 1) if "targets = pack_padded_sequence" in text)
    backward = next(n for n, text in enumerate(lines, 1) if "loss.backward()" in text)
    calls = [n for n, text in enumerate(lines, 1) if text.startswith("train(")]
    message = (
        "`criterion(scores, targets)` is a loss on a detached prediction (`targets = pack_padded_sequence(targets, "
        f"lengths, batch_first=True).data`): backpropagating it (line {backward}) sends the model no gradient through this term"
    )
    finding = Finding(str(path), line, 15, "DL202", RULES["DL202"].name, line, 76, message, "error")
    spec = build_spec(finding, source)
    # Two calls of `train`; `decoder.train()` is not one of them.
    assert spec["call_site"]["others"] == 1 and len(spec["call_site"]["alternatives"]) == 1
    result = run_probe(PROBES["DL202"], spec, 30)
    assert (result["status"], result.get("basis")) == ("refuted", "user-code"), result
    assert "had no graph before the cut" in result["evidence"]
    assert f"each of the file's calls: lines {calls[0]}, {calls[1]}" in result["evidence"]
    # A call the spec does not carry may still show it: the refutation is held back.
    spec["call_site"]["others"] = 2
    held = run_probe(PROBES["DL202"], spec, 30)
    assert held["status"] == "inconclusive" and "the file calls it 2 more time(s)" in held["evidence"], held
