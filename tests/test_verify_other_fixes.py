"""A reproduction that stops on another finding's bug runs with its fix.

Torch 0.3-era training code logs `loss.data[0]`, which raises on today's
0-dim loss (a DL103 finding): every run of the loop stops there, before
another finding's hazard shows. The verifier runs that finding again with
the line read as `loss.item()`, the DL103 finding's own fix, and says so.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import rule_codes

from detachlint.engine import lint_source
from detachlint.registry import load_rules
from detachlint.verify import Verifier, VerifyOptions, other_fixes

pytest.importorskip("torch")

RULES = load_rules()

# A torch 0.3-era MNIST loop: the running loss keeps every graph (DL401),
# and the log line indexes the 0-dim loss (DL103) on the first batch.
OLD_MNIST = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.fc1 = nn.Linear(784, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = x.view(-1, 784)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def train(model, train_loader, optimizer, epoch, log_interval=10):
    model.train()
    total_loss = 0
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = Variable(data), Variable(target)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        total_loss += loss
        if batch_idx % log_interval == 0:
            print('Train Epoch: {} [{}/{}]\\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset), loss.data[0]))
    return total_loss / len(train_loader)
'''

# The same loop where the index is on the finding's own statement.
INDEX_ON_THE_ACCUMULATION = OLD_MNIST.replace("total_loss += loss\n", "total_loss += loss; print(loss.data[0])\n")


def _write(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "mnist_train.py"
    path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
    return path


def _line(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), start=1) if text in line)


def _findings(path: Path, codes):
    return lint_source(path.read_bytes(), str(path), [RULES[r] for c in codes for r in rule_codes(c)]).findings


@pytest.fixture(scope="module")
def verifier(tmp_path_factory):
    verifier = Verifier(VerifyOptions(timeout=10.0))
    verifier.start([str(tmp_path_factory.getbasetemp())])
    yield verifier
    verifier.close()


def _verified(verifier, path: Path, codes):
    return verifier.verify(_findings(path, codes), lambda display: Path(display).read_text(encoding="utf-8"))


def test_accumulated_loss_is_confirmed_with_the_log_line_read_as_item(verifier, tmp_path):
    path = _write(tmp_path, OLD_MNIST)
    verified = _verified(verifier, path, ["DL401", "DL103", "DL701"])
    index_line = _line(path, "loss.data[0]")
    kept = next(f for f in verified if f.code == "DL401")
    assert (kept.verification.status, kept.verification.basis) == ("confirmed", "user-code"), kept.verification
    assert "autograd nodes reachable from `total_loss`" in kept.verification.evidence
    assert f"with line {index_line}'s `loss.data[0]` read as `loss.item()`, the fix of its own DL103 finding" in kept.verification.evidence
    # The DL103 finding itself is judged on its code as written.
    index = next(f for f in verified if f.code == "DL103")
    assert index.verification.status == "confirmed"
    assert "invalid index of a 0-dim tensor" in index.verification.evidence
    assert "read as" not in index.verification.evidence
    # DL103 not selected: its finding, and so its fix, is not there, and the run stops on the index.
    alone = next(f for f in _verified(verifier, path, ["DL401"]) if f.code == "DL401")
    assert alone.verification.status == "inconclusive"
    assert "invalid index of a 0-dim tensor" in alone.verification.evidence


def test_a_fix_on_the_findings_own_statement_is_not_applied(verifier, tmp_path):
    path = _write(tmp_path, INDEX_ON_THE_ACCUMULATION)
    findings = _findings(path, ["DL401", "DL103"])
    kept = next(f for f in findings if f.code == "DL401")
    source = path.read_text()
    assert [fix.line for fix in other_fixes.candidates(kept, findings, source)] == [_line(path, "epoch, batch_idx")]
    verified = next(f for f in _verified(verifier, path, ["DL401", "DL103"]) if f.code == "DL401")
    assert verified.verification.status == "inconclusive"
    assert "invalid index of a 0-dim tensor" in verified.verification.evidence


def test_only_fixes_that_keep_the_meaning_are_carried(tmp_path):
    path = _write(tmp_path, OLD_MNIST)
    findings = _findings(path, ["DL401", "DL103", "DL701"])
    assert any(f.code in ("DL701", "DL702") and f.fix is not None for f in findings)
    kept = next(f for f in findings if f.code == "DL401")
    fixes = other_fixes.candidates(kept, findings, path.read_text())
    # `Variable(data)` -> `data` has a fix too, but not one of the kept meanings.
    assert [(f.code, f.old, f.new) for f in fixes] == [("DL103", "loss.data[0]", "loss.item()")]
    fixed = other_fixes.applied(path.read_text(), fixes)
    assert fixed.count("\n") == path.read_text().count("\n")
    assert "len(train_loader.dataset), loss.item()))" in fixed


def test_emitted_script_carries_the_fix_it_ran_with(tmp_path):
    path = _write(tmp_path, OLD_MNIST)
    verifier = Verifier(VerifyOptions(run=True, timeout=10.0, emit_repro=tmp_path / "repro"))
    verifier.start([str(tmp_path)])
    try:
        verifier.verify(_findings(path, ["DL401", "DL103"]), lambda display: Path(display).read_text(encoding="utf-8"))
    finally:
        verifier.close()
    scripts = {p.name: p.read_text() for p in (tmp_path / "repro").glob("*.py")}
    dl401 = [name for name in scripts if name.endswith("_DL401.py")]
    assert dl401 and "loss.item()" in scripts[dl401[0]]
    # The script prints the verdict the report shows, the fix named.
    ran = subprocess.run([sys.executable, str(tmp_path / "repro" / dl401[0])], capture_output=True, text=True, timeout=120)
    assert ran.stdout.rstrip().endswith("(with line 32's `loss.data[0]` read as `loss.item()`, the fix of its own DL103 finding)"), ran.stdout + ran.stderr


TWO_READS_ON_THE_LOG_LINE = '''
import torch.nn.functional as F


def train(model, loader, optimizer):
    total = 0
    for x, y in loader:
        out = model(x)
        loss = F.cross_entropy(out, y)
        penalty = out.pow(2).sum()
        (loss + 1e-4 * penalty).backward()
        optimizer.step()
        total += loss
        print(loss.data[0], penalty.data[0])
    return total
'''


def test_two_fixes_on_one_line_both_go_in(tmp_path):
    path = _write(tmp_path, TWO_READS_ON_THE_LOG_LINE)
    findings = _findings(path, ["DL401", "DL103"])
    kept = next(f for f in findings if f.code == "DL401")
    fixes = other_fixes.candidates(kept, findings, path.read_text())
    fixed = other_fixes.applied(path.read_text(), fixes)
    assert "        print(loss.item(), penalty.item())\n" in fixed
    line = _line(path, "penalty.data[0]")
    assert other_fixes.note(fixes) == (
        f" (with line {line}'s `loss.data[0]` read as `loss.item()`, the fix of its own DL103 finding;"
        f" with line {line}'s `penalty.data[0]` read as `penalty.item()`, the fix of its own DL103 finding)"
    )
