"""The DL102 probe on code the file's own `__main__` block calls: a rebound
activation's backward is compared on the parameters of the model the
program itself built (in scope where the rebinding runs), not only on
models the verifier synthesized.

The session's one verifier worker (tests/conftest.py) serves the file.
"""

from __future__ import annotations

import pytest

from conftest import line_of, verify_findings

pytest.importorskip("torch")  # the verifier's extra; CI installs it with [dev]

# The script builds the model, the optimizer and a batch, then trains one step.
DECISIONS_IN_A_SCRIPT = '''
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


if __name__ == "__main__":
    torch.manual_seed(0)
    model = SpamClassifier(n_features=12)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(16, 12)
    labels = torch.randint(0, 2, (16,))
    print(train_step(model, x, labels, optimizer))
'''

# Cross-entropy saved no copy of the logits the rebinding replaces.
CONFIDENCE_IN_A_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F


class Classifier(nn.Module):
    def __init__(self, n_in=20, n_classes=5):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_in, 32), nn.ReLU(), nn.Linear(32, n_classes))

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


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Classifier(n_in=10, n_classes=3)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    x = torch.randn(32, 10)
    labels = torch.randint(0, 3, (32,))
    print(train_step(model, x, labels, optimizer))
'''


# The script scores hidden units with a forward pass whose outputs it keeps,
# then drops units through `.data`: the kept graph still records the old shape.
PRUNED_AFTER_A_SALIENCY_PASS = '''
import torch
from torch import nn


class MLP(nn.Module):
    def __init__(self, n_in=16, hidden=12, n_out=4):
        super().__init__()
        self.hidden = nn.Linear(n_in, hidden)
        self.out = nn.Linear(hidden, n_out)

    def forward(self, x):
        return self.out(torch.tanh(self.hidden(x)))


def saliency(model, batch):
    logits = model(batch)
    importance = model.hidden.weight.abs().sum(1)
    return logits, importance


def drop_units(layer, keep):
    layer.weight.data = layer.weight.data[:keep]
    layer.bias.data = layer.bias.data[:keep]
    layer.out_features = keep


def finetune(model, batch, target, steps=10):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        loss = nn.functional.mse_loss(model(batch), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = MLP()
    batch = torch.randn(32, 16)
    logits, importance = saliency(model, batch)
    drop_units(model.hidden, 8)
    model.out.weight.data = model.out.weight.data[:, :8]
    print(finetune(model, batch, torch.randn(32, 4)))
'''


def _verdict(verifier, tmp_path, source, text):
    verdicts = verify_findings(verifier, tmp_path, "train.py", source, "DL102")
    line = line_of(source, text)
    assert line in verdicts, f"no DL102 finding on line {line}: {sorted(verdicts)}"
    return verdicts[line]


def test_activation_rebound_in_the_scripts_own_step_changes_its_models_gradients(verifier, tmp_path):
    verification = _verdict(verifier, tmp_path, DECISIONS_IN_A_SCRIPT, "probs.data = ")
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification
    assert "the gradients differ by up to" in verification.evidence
    # The parameter named is one of the model the script built.
    assert "`model.net." in verification.evidence


def test_activation_rebound_the_graph_did_not_save_is_refuted_on_the_scripts_model(verifier, tmp_path):
    verification = _verdict(verifier, tmp_path, CONFIDENCE_IN_A_SCRIPT, "logits.data = ")
    assert (verification.status, verification.basis) == ("refuted", "user-code"), verification
    assert "equal those of a run without it" in verification.evidence


def test_weight_sliced_while_the_scripts_earlier_graph_lives_is_confirmed(verifier, tmp_path):
    verification = _verdict(verifier, tmp_path, PRUNED_AFTER_A_SALIENCY_PASS, "layer.weight.data = ")
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification
    assert "from float32 [12, 16] to float32 [8, 16]" in verification.evidence
    assert "returned an invalid gradient" in verification.evidence
