"""The probes of the `.data` rules against real torch: DL102 (`.data`
rebound, `.data.resize_`) and DL103 (`.data` read where harm follows). Each
kind of finding is confirmed on the user's own code, and look-alikes the
linter flags are refuted or left inconclusive by what the run shows.

The session's one verifier worker (tests/conftest.py) serves the file.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import textwrap

import pytest

from conftest import line_of, verify_findings

from conftest import run_cli

pytest.importorskip("torch")  # the verifier's extra; CI installs it with [dev]

# A torch 0.3-era demo refills a placeholder through `.data.resize_`.
RESIZED_PLACEHOLDER = '''
import torch
from torch import nn


class Detector(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.head = nn.Linear(8, 4)

    def forward(self, images):
        return self.head(self.backbone(images).mean(dim=(2, 3)))


def detect(model, images):
    im_data = torch.FloatTensor(1)
    boxes = []
    model.eval()
    with torch.no_grad():
        for image in images:
            im_data.data.resize_(image.size()).copy_(image)
            boxes.append(model(im_data))
    return boxes
'''

# Pruning inputs right after a forward whose graph is still alive.
PRUNED_WHILE_A_GRAPH_LIVES = '''
import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def prune_inputs(model, x, keep=12):
    # rank the input features by the size of the first layer's response
    importance = (model.fc1(x) ** 2).mean()
    model.fc1.weight.data = model.fc1.weight.data[:, :keep]
    model.fc1.in_features = keep
    return importance


def train(model, loader, optimizer, keep=12):
    for step, (x, y) in enumerate(loader):
        loss = F.cross_entropy(model(x[:, : model.fc1.in_features]), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step == 100:
            prune_inputs(model, x, keep)
'''

# Weights cast to half precision after every step.
HALF_WEIGHTS_EVERY_STEP = '''
import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def train(model, loader, optimizer):
    model.train()
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        # keep the weights in half precision between steps to save memory
        for p in model.parameters():
            p.data = p.data.half()
'''

# A hand-written SGD step: same shape and dtype, nothing holds the old storage.
MANUAL_SGD = '''
import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def train(model, loader, lr=0.1):
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        model.zero_grad()
        loss.backward()
        for p in model.parameters():
            p.data = p.data - lr * p.grad
'''

# Probabilities a BCE loss saved are replaced by decisions before backward.
DECISIONS_OVER_PROBABILITIES = '''
import torch
from torch import nn
import torch.nn.functional as F


class SpamClassifier(nn.Module):
    def __init__(self, n_features=20):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_features, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, x):
        return self.net(x).squeeze(1)


def train_step(model, x, labels, optimizer):
    probs = torch.sigmoid(model(x))
    loss = F.binary_cross_entropy(probs, labels.float())
    # turn the probabilities into decisions for the accuracy below
    probs.data = (probs.data > 0.5).float()
    accuracy = (probs == labels).float().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item(), accuracy.item()
'''

# Logits replaced by probabilities after a cross-entropy, which saved its own output.
PROBABILITIES_OVER_LOGITS = '''
import torch
from torch import nn
import torch.nn.functional as F


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))

    def forward(self, x):
        return self.net(x)


def train_step(model, x, labels, optimizer):
    logits = model(x)
    loss = F.cross_entropy(logits, labels)
    # reuse the buffer for the probabilities the confidence log needs
    logits.data = logits.data.softmax(dim=1)
    confidence = logits.max(dim=1)[0].mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item(), confidence.item()
'''

# A torch 0.3-era loop logs `loss.data[0]`.
LOSS_DATA_INDEX = '''
import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 32)
        self.fc2 = nn.Linear(32, 5)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def train(model, loader, optimizer):
    running = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        running += loss.data[0]
    return running / len(loader)
'''

# The model returns a 1-element loss per replica: `loss.data[0]` works.
REPLICA_LOSS_INDEX = '''
import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 32)
        self.fc2 = nn.Linear(32, 5)

    def forward(self, x, y):
        loss = F.cross_entropy(self.fc2(F.relu(self.fc1(x))), y)
        # one value per replica, so that DataParallel can gather the losses
        return loss.unsqueeze(0)


def compute_loss(model, x, y):
    return model(x, y).sum()


def train(model, loader, optimizer):
    running = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        loss = model(x, y)
        loss.backward()
        optimizer.step()
        running += loss.data[0]
    return running / len(loader)
'''

# A focal loss whose modulating factor is read through `.data`.
FOCAL_FACTOR = '''
import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 32)
        self.fc2 = nn.Linear(32, 5)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def focal_step(model, x, y, optimizer, gamma=2.0):
    logpt = F.log_softmax(model(x), dim=1).gather(1, y.view(-1, 1)).view(-1)
    pt = logpt.data.exp()
    loss = (-((1 - pt) ** gamma) * logpt).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()
'''

# An L1 penalty on a parameter's `.data`: a constant term.
L1_PENALTY_ON_DATA = '''
import torch
from torch import nn
import torch.nn.functional as F


class TopicModel(nn.Module):
    def __init__(self, n_genes=50, n_topics=6):
        super().__init__()
        self.encoder = nn.Linear(n_genes, n_topics)
        self.topics = nn.Parameter(torch.randn(n_topics, n_genes))

    def forward(self, x):
        theta = torch.softmax(self.encoder(x), dim=-1)
        return theta @ self.topics


def train_step(model, x, optimizer, l1=1e-3):
    recon = F.mse_loss(model(x), x)
    penalty = torch.norm(model.topics.data, p=1)
    loss = recon + l1 * penalty
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()
'''

# A recurrent state cut at every step inside `forward`.
STATE_CUT_IN_LOOP = '''
import torch
from torch import nn


class CharEncoder(nn.Module):
    def __init__(self, vocab=30, dim=8, n_hidden=16):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.cell = nn.GRUCell(dim, n_hidden)
        self.n_hidden = n_hidden

    def forward(self, tokens):
        x = self.embed(tokens)
        h = x.new_zeros(x.size(0), self.n_hidden)
        for t in range(x.size(1)):
            out = self.cell(x[:, t], h)
            h = h.data.clone()
            h[:] = out
        return h
'''

# The "previous" weights kept as an alias of `p.data`, then updated in place.
WEIGHTS_KEPT_AS_ALIAS = '''
import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 32)
        self.fc2 = nn.Linear(32, 5)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class UpdateRatioTrainer:
    """Plain SGD that logs how far each step moves every weight."""

    def __init__(self, model, lr=0.1):
        self.model = model
        self.lr = lr
        self.previous = {}
        self.ratios = {}

    def step(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        self.model.zero_grad()
        loss.backward()
        for name, p in self.model.named_parameters():
            weight = p.data
            if name in self.previous:
                self.ratios[name] = ((weight - self.previous[name]).norm() / weight.norm()).item()
            self.previous[name] = weight
            p.data.add_(p.grad, alpha=-self.lr)
        return loss.item()
'''

# The previous gradient kept as an alias of `p.grad`; `zero_grad()` sets grads to None.
GRADIENT_KEPT_AS_ALIAS = '''
import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 32)
        self.fc2 = nn.Linear(32, 5)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class SignAgreementTrainer:
    """Scales each step by how often the gradient's sign agrees with the previous one."""

    def __init__(self, model, lr=0.1):
        self.model = model
        self.lr = lr
        self.previous = {}

    def step(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        self.model.zero_grad()
        loss.backward()
        for name, p in self.model.named_parameters():
            grad = p.grad.data
            scale = 1.0
            if name in self.previous:
                scale = (grad.sign() == self.previous[name].sign()).float().mean().item()
            self.previous[name] = grad
            p.data.add_(grad, alpha=-self.lr * scale)
        return loss.item()
'''


# Weight decay added to the gradient in place before it is kept: no rewrite after the store.
GRADIENT_DECAYED_THEN_KEPT = '''
import torch
from torch import nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 32)
        self.fc2 = nn.Linear(32, 5)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class SignAgreementTrainer:
    def __init__(self, model, lr=0.1, weight_decay=1e-2):
        self.model = model
        self.lr = lr
        self.weight_decay = weight_decay
        self.previous = {}

    def step(self, x, y):
        loss = F.cross_entropy(self.model(x), y)
        self.model.zero_grad()
        loss.backward()
        for name, p in self.model.named_parameters():
            grad = p.grad.data
            grad.add_(p.data, alpha=self.weight_decay)
            scale = 1.0
            if name in self.previous:
                scale = (grad.sign() == self.previous[name].sign()).float().mean().item()
            self.previous[name] = grad
            p.data.add_(grad, alpha=-self.lr * scale)
        return loss.item()
'''


def _verdict(verifier, tmp_path, source, code, text):
    """The verification of the finding of `code` on the line holding `text`."""
    verdicts = verify_findings(verifier, tmp_path, "train.py", source, code)
    line = line_of(source, text)
    assert line in verdicts, f"no {code} finding on line {line}: {sorted(verdicts)}"
    return verdicts[line]


def _confirmed(verification):
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification
    return verification.evidence


def test_dl102_resize_through_data_leaves_the_placeholder_its_shape(verifier, tmp_path):
    evidence = _confirmed(_verdict(verifier, tmp_path, RESIZED_PLACEHOLDER, "DL102", "im_data.data.resize_"))
    assert "`.data` was resized to [" in evidence and "while `im_data` kept its shape [1]" in evidence


def test_dl102_reshaping_rebind_meets_autograd_expecting_the_old_shape(verifier, tmp_path):
    evidence = _confirmed(_verdict(verifier, tmp_path, PRUNED_WHILE_A_GRAPH_LIVES, "DL102", "weight.data = "))
    assert "went from float32 [16, 20] to float32 [16, 12]" in evidence
    assert "returned an invalid gradient" in evidence and "expected shape compatible with [16, 20]" in evidence


def test_dl102_parameter_cast_every_step_goes_unnoticed_until_it_breaks(verifier, tmp_path):
    evidence = _confirmed(_verdict(verifier, tmp_path, HALF_WEIGHTS_EVERY_STEP, "DL102", "p.data = p.data.half()"))
    assert "went from float32 [16, 20] to float16 [16, 20] without an error at the statement" in evidence
    assert "must have the same dtype" in evidence


def test_dl102_manual_sgd_is_not_confirmed(verifier, tmp_path):
    # Same shape and dtype, and nothing in the run keeps the old storage.
    verification = _verdict(verifier, tmp_path, MANUAL_SGD, "DL102", "p.data = p.data - lr")
    assert verification.status == "inconclusive", verification
    assert "moved to new storage of the same dtype and shape" in verification.evidence


def test_dl102_activation_rebound_under_the_graph_changes_the_gradients(verifier, tmp_path):
    evidence = _confirmed(_verdict(verifier, tmp_path, DECISIONS_OVER_PROBABILITIES, "DL102", "probs.data = "))
    assert "on the same loss" in evidence and "the gradients differ by up to" in evidence


def test_dl102_activation_the_graph_did_not_save_is_refuted(verifier, tmp_path):
    verification = _verdict(verifier, tmp_path, PROBABILITIES_OVER_LOGITS, "DL102", "logits.data = ")
    assert (verification.status, verification.basis) == ("refuted", "user-code"), verification
    assert "equal those of a run without it" in verification.evidence


def test_dl103_zero_dim_index_raises(verifier, tmp_path):
    evidence = _confirmed(_verdict(verifier, tmp_path, LOSS_DATA_INDEX, "DL103", "loss.data[0]"))
    assert "IndexError: invalid index of a 0-dim tensor" in evidence


def test_dl103_index_of_a_one_element_loss_is_refuted(verifier, tmp_path):
    verification = _verdict(verifier, tmp_path, REPLICA_LOSS_INDEX, "DL103", "loss.data[0]")
    assert (verification.status, verification.basis) == ("refuted", "user-code"), verification
    assert "ran without raising" in verification.evidence


def test_dl103_cut_factor_is_a_constant(verifier, tmp_path):
    evidence = _confirmed(_verdict(verifier, tmp_path, FOCAL_FACTOR, "DL103", "logpt.data.exp()"))
    assert "`logpt` requires grad (grad_fn=ViewBackward0)" in evidence
    assert "`pt`, built from `logpt.data`, has requires_grad=False" in evidence


def test_dl103_penalty_on_data_is_a_constant(verifier, tmp_path):
    evidence = _confirmed(_verdict(verifier, tmp_path, L1_PENALTY_ON_DATA, "DL103", "model.topics.data"))
    assert "`model.topics` requires grad" in evidence and "`penalty`" in evidence and "requires_grad=False" in evidence


def test_dl103_state_cut_inside_the_loop(verifier, tmp_path):
    evidence = _confirmed(_verdict(verifier, tmp_path, STATE_CUT_IN_LOOP, "DL103", "h.data.clone()"))
    assert "on step 2 of the loop, `h` required grad" in evidence and "and not after" in evidence


def test_dl103_kept_weights_are_rewritten_with_the_update(verifier, tmp_path):
    evidence = _confirmed(_verdict(verifier, tmp_path, WEIGHTS_KEPT_AS_ALIAS, "DL103", "weight = p.data"))
    assert "shares `p`'s storage (same data_ptr) and equals it" in evidence
    assert "were rewritten in place after it was stored" in evidence


def test_dl103_kept_gradient_nothing_rewrote_is_not_confirmed(verifier, tmp_path):
    # `zero_grad()` sets the grads to None: the next backward makes a new tensor.
    verification = _verdict(verifier, tmp_path, GRADIENT_KEPT_AS_ALIAS, "DL103", "grad = p.grad.data")
    assert verification.status == "inconclusive", verification
    assert "shares `p.grad`'s storage" in verification.evidence
    assert "nothing rewrote it in place after it was stored" in verification.evidence


def test_dl103_kept_gradient_edited_before_it_is_stored_is_not_confirmed(verifier, tmp_path):
    verification = _verdict(verifier, tmp_path, GRADIENT_DECAYED_THEN_KEPT, "DL103", "grad = p.grad.data")
    assert verification.status == "inconclusive", verification
    assert "nothing rewrote it in place after it was stored" in verification.evidence


@pytest.mark.parametrize(
    "source, code",
    [(DECISIONS_OVER_PROBABILITIES, "DL102"), (WEIGHTS_KEPT_AS_ALIAS, "DL103")],
    ids=["DL102-activation", "DL103-kept-alias"],
)
def test_emitted_script_prints_the_reports_verdict(tmp_path, source, code):
    # These probes patch torch and read frames: the standalone copy must do the same.
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
    out = tmp_path / "repro"
    result = run_cli(
        "check", "--jobs", "1", "--no-cache", "--verify", "--show-refuted", "--format", "json",
        "--select", code, "--emit-repro", str(out), str(path),
    )
    assert result.returncode in (0, 1), result.stderr
    (finding,) = json.loads(result.stdout)
    verification = finding["verification"]
    (script,) = sorted(out.glob(f"*_{code}.py"))
    with tempfile.TemporaryDirectory() as cwd:
        replay = subprocess.run([sys.executable, "-I", str(script)], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert verification["status"] == "confirmed", verification
    assert replay.returncode == 1, replay.stderr[-2000:]
    basis = f" ({verification['basis']})" if verification.get("basis") else ""
    assert replay.stdout.strip().splitlines()[-1] == f"{verification['status']}{basis}: {verification['evidence']}"
