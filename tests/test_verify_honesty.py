"""Issue 15: `--verify` must not confirm a finding on correct code with
evidence that is false of the user's program.

An audit found five confirmations on CORRECT code whose evidence stated
something the program never does. Each case below is a small correct file
that the static rules used to flag. They no longer do (a model frozen by its
own constructor, code guarded by `torch.is_grad_enabled()`), and each test
checks that first. The verifier must stay honest when a rule errs, so each
test then hands it the finding the rule used to report, verbatim; one
verify run (one worker) checks them all, and each test asserts that the
verdict is not `confirmed` and that no sentence of its evidence claims what
the program cannot do.

Case 1 (DL501 saying ".grad None after backward" on a tensor that called
`retain_grad()` and holds a gradient) is already covered by
`tests/test_verify.py::test_dl501_reads_grad_before_it_says_none`; it is not
repeated here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from detachlint.finding import Finding, Verification

pytest.importorskip("torch")  # the verifier's extra

from test_verify import RULES, _lint, _write, verifier  # noqa: E402,F401 - `verifier`: the worker fixture of test_verify

# Case 2: a feature extractor frozen for life (every parameter
# `requires_grad_(False)` in its constructor), run over batches in script code
# after `.eval()`. DL301 flags the loop; no graph is ever recorded, because
# nothing in the model requires grad.
FROZEN_EVAL_LOOP = '''
    import torch
    from torch import nn


    class FeatureExtractor(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
            for p in self.parameters():
                p.requires_grad_(False)

        def forward(self, x):
            return self.net(x)


    extractor = FeatureExtractor()
    extractor.eval()
    features = []
    for batch in torch.randn(5, 4, 16):
        features.append(extractor(batch))
    features = torch.cat(features)
    print(features.shape)
    '''

# Case 3: `.numpy()` guarded by `if not torch.is_grad_enabled():`. The branch
# runs only with autograd off, where the logits carry no graph; forcing it
# while autograd is on shows a state the program can never be in.
GRAD_MODE_BRANCH = '''
    import torch
    from torch import nn


    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 4)
            self.scores = []

        def forward(self, x):
            logits = self.fc(x)
            if not torch.is_grad_enabled():
                # evaluation only (no graph): keep the scores for the confusion matrix
                self.scores.append(logits.softmax(-1).numpy())
            return logits
    '''

# Case 4: an evaluation helper that refuses to run with autograd on. Its own
# guard error is the program working as written, not "could not run"; with
# autograd off (the only way it runs) the loop records no graph and keeps
# nothing. DL301 and DL401 both flag the loop.
NO_GRAD_GUARD = '''
    import torch
    from torch import nn


    class Regressor(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))

        def forward(self, x):
            return self.body(x)


    def evaluate(model, loader):
        if torch.is_grad_enabled():
            raise RuntimeError("evaluate() must be called under torch.no_grad()")
        model.eval()
        predictions = []
        for x in loader:
            predictions.append(model(x))
        return torch.cat(predictions)
    '''

# Case 5 (case 2's kind, another rule): a distillation script's teacher is
# frozen (`self.requires_grad_(False)`), so `.numpy()` on its soft labels
# returns an array. DL402 flags it.
FROZEN_TEACHER_NUMPY = '''
    import numpy as np
    import torch
    from torch import nn


    class Teacher(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 4)
            self.requires_grad_(False)

        def forward(self, x):
            return self.fc(x)


    teacher = Teacher()
    rows = []
    for x in torch.randn(3, 2, 16):
        rows.append(teacher(x).softmax(-1).numpy())
    np.save("soft_labels.npy", np.concatenate(rows))
    '''

# Case 6 (found later, by verifying an older version's false findings on the
# real-bug benchmark): a captioning loss packs predictions and targets, and
# `PackedSequence.data` is a field, not a cut. The targets are integer labels
# that never had a graph, so a term "without gradient through `targets`" is
# no hazard; the predictions keep theirs. DL202 once flagged both lines.
PACKED_TARGETS = '''
    import torch
    from torch import nn
    from torch.nn.utils.rnn import pack_padded_sequence


    class Decoder(nn.Module):
        def __init__(self, vocab=12, hidden=16):
            super().__init__()
            self.embed = nn.Embedding(vocab, hidden)
            self.rnn = nn.GRU(hidden, hidden, batch_first=True)
            self.out = nn.Linear(hidden, vocab)

        def forward(self, captions):
            states, _ = self.rnn(self.embed(captions))
            return self.out(states)


    def train_step(decoder, optimizer, criterion, captions, lengths):
        scores = decoder(captions[:, :-1])
        targets = captions[:, 1:]
        # Packing drops the padding; `.data` here is the PackedSequence's field.
        scores = pack_padded_sequence(scores, lengths, batch_first=True).data
        targets = pack_padded_sequence(targets, lengths, batch_first=True).data
        loss = criterion(scores, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()


    decoder = Decoder()
    optimizer = torch.optim.Adam(decoder.parameters(), lr=1e-3)
    captions = torch.randint(0, 12, (4, 7))
    print(train_step(decoder, optimizer, nn.CrossEntropyLoss(), captions, [6, 5, 4, 3]))
    '''

_PACKED = "`criterion(scores, targets)` is a loss on a detached prediction (`{0} = pack_padded_sequence({0}, lengths, batch_first=True).data`): backpropagating it (line 26) sends the model no gradient through this term"

# name: (source, [(code, line, column, end column, message) the static rules
# used to report], patterns no evidence may contain, why)
CASES = {
    "frozen_eval_loop": (
        FROZEN_EVAL_LOOP,
        [("DL301", 20, 21, 37, "`extractor` runs with autograd on in this evaluation loop")],
        [r"requires_grad=True", r"keeps [^;]* of saved activations alive"],
        "every parameter of `extractor` has requires_grad=False: its output has requires_grad=False and saves nothing",
    ),
    "grad_mode_branch": (
        GRAD_MODE_BRANCH,
        [("DL402", 15, 32, 58, "`logits.softmax(-1).numpy()` raises \"Can't call numpy() on Tensor that requires grad\"")],
        [r"Can't call numpy\(\) on Tensor that requires grad", r"requires_grad=True"],
        "the `.numpy()` runs only when `torch.is_grad_enabled()` is False: it never raises",
    ),
    "no_grad_guard": (
        NO_GRAD_GUARD,
        [
            ("DL301", 20, 28, 36, "`model` runs with autograd on in this evaluation loop"),
            ("DL401", 20, 9, 37, "`predictions.append(model(x))` keeps every iteration's autograd graph alive"),
        ],
        [
            r"requires_grad=True",
            r"saved activations alive",
            r"requires grad, as",
            r"autograd nodes reachable after",
            # The guard is the program working as written, not a failure to run.
            r"could not run with synthesized inputs: RuntimeError: evaluate\(\) must be called",
        ],
        "`evaluate` raises its own error unless autograd is off, and with autograd off nothing records a graph",
    ),
    "frozen_teacher_numpy": (
        FROZEN_TEACHER_NUMPY,
        [("DL402", 19, 17, 47, "`teacher(x).softmax(-1).numpy()` raises \"Can't call numpy() on Tensor that requires grad\"")],
        [r"Can't call numpy\(\) on Tensor that requires grad", r"requires_grad=True"],
        "the teacher's parameters all have requires_grad=False: `.numpy()` on its output returns an array",
    ),
    "packed_targets": (
        PACKED_TARGETS,
        [("DL202", 22, 14, 74, _PACKED.format("scores")), ("DL202", 23, 15, 76, _PACKED.format("targets"))],
        [r"none of its gradient comes through", r"requires_grad=False, grad_fn=None; the backward"],
        "the predictions keep their graph through the packing, and the targets are labels that never had one",
    ),
}


def _false_claims(verification: Verification, forbidden) -> list:
    """What is wrong with this verdict for correct code: a confirmation, or a
    sentence of the evidence the program contradicts."""
    problems = []
    if verification is None:
        return ["no verdict"]
    if verification.status == "confirmed":
        problems.append("confirmed on correct code")
    for pattern in forbidden:
        if re.search(pattern, verification.evidence or ""):
            problems.append(f"evidence claims /{pattern}/")
    return problems


@pytest.fixture(scope="module")
def honesty_verdicts(verifier, tmp_path_factory):  # noqa: F811 - the imported fixture
    """{case: {(code, line): Verification}}, and what the static rules flag
    in each case file now: the findings they used to report, verified in
    one run of the shared worker."""
    folder = tmp_path_factory.mktemp("honesty")
    findings, flagged = [], {}
    for name, (source, expected, _, _) in CASES.items():
        path = _write(folder, f"{name}.py", source)
        codes = sorted({code for code, *_ in expected})
        flagged[name] = {(f.code, f.line) for f in _lint(path, str(path), codes)}
        for code, line, column, end_column, message in expected:
            rule = RULES[code]
            findings.append(Finding(str(path), line, column, code, rule.name, line, end_column, message, rule.severity))
    verified = verifier.verify(findings, lambda display: Path(display).read_text(encoding="utf-8"))
    verdicts = {name: {} for name in CASES}
    for finding in verified:
        verdicts[Path(finding.path).stem][(finding.code, finding.line)] = finding.verification
    return verdicts, flagged


def _check(honesty_verdicts, name):
    verdicts, flagged = honesty_verdicts
    _, expected, forbidden, why = CASES[name]
    # Correct code: the static rules leave it alone.
    assert not flagged[name], f"{name}: correct code flagged at {sorted(flagged[name])}"
    failures = []
    for code, line, *_ in expected:
        key = (code, line)
        verification = verdicts[name].get(key)
        problems = _false_claims(verification, forbidden)
        if problems:
            failures.append(
                f"{name} {key[0]} line {key[1]}: {'; '.join(problems)} ({why}); verdict "
                f"{verification.status if verification else None}/{verification.basis if verification else None}: "
                f"{verification.evidence if verification else None}"
            )
    assert not failures, "\n".join(failures)


def test_frozen_model_eval_loop_is_not_said_to_record_a_graph(honesty_verdicts):
    """Case 2 (DL301): a pattern-level check must not report requires_grad=True for a frozen model's output."""
    _check(honesty_verdicts, "frozen_eval_loop")


def test_branch_only_taken_with_autograd_off_is_not_forced_into_a_hazard(honesty_verdicts):
    """Case 3 (DL402): forcing `if not torch.is_grad_enabled():` with autograd on shows nothing the program does."""
    _check(honesty_verdicts, "grad_mode_branch")


def test_the_users_no_grad_guard_is_not_could_not_run(honesty_verdicts):
    """Case 4 (DL301, DL401): the user's "call me under no_grad" error is not a
    failure to run that a pattern-level check then confirms."""
    _check(honesty_verdicts, "no_grad_guard")


def test_frozen_teacher_numpy_is_not_said_to_raise(honesty_verdicts):
    """Case 5 (DL402): a pattern-level check must not say `.numpy()` raises on a frozen model's output."""
    _check(honesty_verdicts, "frozen_teacher_numpy")


def test_plain_data_cut_by_nothing_is_not_a_detached_prediction(honesty_verdicts):
    """Case 6 (DL202): `.data` of a PackedSequence of labels cuts no graph;
    the verifier checks what the cut was applied to before it confirms."""
    _check(honesty_verdicts, "packed_targets")


def test_the_checks_reject_the_audited_verdicts():
    """The checks above can fail: each audited verdict (status and evidence as
    the verifier gave them before issue 15) is rejected, and so is any
    `confirmed`."""
    audited = {
        "frozen_eval_loop": "pattern-level (the loop is top-level script code, which the verifier never runs): a model called as in "
        "`extractor(batch)` after `.eval()` with autograd on returns requires_grad=True (grad_fn=AddmmBackward0) and keeps "
        "320 bytes of saved activations alive per step",
        "grad_mode_branch": "`logits.softmax(-1).numpy()` raised RuntimeError: Can't call numpy() on Tensor that requires grad. "
        "Use tensor.detach().numpy() instead. (`if` on line 13 forced)",
        "no_grad_guard": "pattern-level (the code could not run with synthesized inputs: RuntimeError: evaluate() must be called "
        "under torch.no_grad() on line 16): accumulating a loss that requires grad, as `predictions` does, keeps 7, 12, 17 "
        "autograd nodes reachable after iterations 1-3",
        "frozen_teacher_numpy": "pattern-level (the code is top-level script code, which the verifier never runs): `.numpy()` on a "
        "model output, as in `teacher(x).softmax(-1).numpy()`, raises RuntimeError: Can't call numpy() on Tensor that requires "
        "grad. Use tensor.detach().numpy() instead.",
    }
    # Case 6, as the verifier confirmed it before it looked at the cut's operand.
    audited["packed_targets"] = (
        "`targets`: requires_grad=False, grad_fn=None; the backward after it ran on the loss's other terms only, "
        "none of its gradient comes through `targets`"
    )
    for name, evidence in audited.items():
        forbidden = CASES[name][2]
        assert _false_claims(Verification("plausible", evidence, None, "pattern"), forbidden), name
        assert _false_claims(Verification("confirmed", "ran", None, "user-code"), forbidden) == ["confirmed on correct code"]
    # Honest verdicts pass: what the probes say when the code runs as written
    # (for the guarded cases, with autograd off as the guard demands).
    honest = {
        "frozen_eval_loop": "`extractor(batch)` returned requires_grad=False: no graph was recorded",
        "grad_mode_branch": "`logits.softmax(-1).numpy()` ran on a tensor with requires_grad=False and returned an array",
        "no_grad_guard": "`predictions` holds no autograd graph (nodes after each iteration: 0, 0, 0)",
        "frozen_teacher_numpy": "`teacher(x).softmax(-1).numpy()` ran on a tensor with requires_grad=False and returned an array",
        "packed_targets": "`pack_padded_sequence(targets, lengths, batch_first=True)` had no graph before the cut: `targets` is plain data",
    }
    for name, evidence in honest.items():
        assert _false_claims(Verification("refuted", evidence, None, "user-code"), CASES[name][2]) == [], name
