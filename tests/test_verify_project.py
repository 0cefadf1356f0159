"""The reproduction imports the project's own modules as the file does when
it runs: a model defined in `models.py` and evaluated in `evaluate.py` runs
as the user's code, and so does a relative import inside a package.

One worker serves the file (torch loads once).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from detachlint.engine import lint_source
from detachlint.registry import load_rules
from detachlint.verify import Verifier, VerifyOptions, project_of

pytest.importorskip("torch")  # the verifier's extra; CI installs it with [dev]

RULES = load_rules()

MODELS = '''
from torch import nn


class ConvNet(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.MaxPool2d(2))
        self.head = nn.Linear(8 * 13 * 13, classes)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))
'''

EVALUATE = '''
import torch

from {source} import ConvNet


def evaluate(model: ConvNet, loader):
    model.eval()
    correct = 0
    for images, labels in loader:
        outputs = model(images)
        correct += (outputs.argmax(1) == labels).sum().item()
    return correct
'''


@pytest.fixture(scope="module")
def verifier(tmp_path_factory):
    verifier = Verifier(VerifyOptions(timeout=10.0))
    verifier.start([str(tmp_path_factory.getbasetemp())])
    yield verifier
    verifier.close()


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def _verify(verifier, path: Path):
    findings = lint_source(path.read_bytes(), str(path), [RULES["DL301"]]).findings
    assert [f.line for f in findings] == [10]
    (verified,) = verifier.verify(findings, lambda display: Path(display).read_text(encoding="utf-8"))
    return verified.verification


def test_a_model_from_a_sibling_module_runs_as_the_users_code(verifier, tmp_path):
    _write(tmp_path / "models.py", MODELS)
    evaluate = _write(tmp_path / "evaluate.py", EVALUATE.format(source="models"))
    verification = _verify(verifier, evaluate)
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification
    assert "not installed" not in verification.evidence and "stand-in" not in verification.evidence


def test_a_relative_import_inside_a_package_runs_too(verifier, tmp_path):
    _write(tmp_path / "project" / "__init__.py", "")
    _write(tmp_path / "project" / "models.py", MODELS)
    evaluate = _write(tmp_path / "project" / "evaluate.py", EVALUATE.format(source=".models"))
    assert project_of(str(evaluate)) == {"paths": [str(tmp_path / "project"), str(tmp_path)], "package": "project"}
    verification = _verify(verifier, evaluate)
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification


def test_a_buffer_that_is_no_file_imports_nothing_from_disk():
    assert project_of("<unsaved buffer>") == {"paths": [], "package": ""}



EVALUATE_WITH_MISSING_SETTINGS = '''
import torch

from .models import ConvNet
from .settings import (
    RUN,
)


def evaluate(model: ConvNet, loader):
    model.eval()
    correct = 0
    for images, labels in loader:
        outputs = model(images.to(RUN.device))
        correct += (outputs.argmax(1) == labels).sum().item()
    return correct
'''


def test_a_relative_import_that_fails_is_named_by_its_module(verifier, tmp_path):
    _write(tmp_path / "project" / "__init__.py", "")
    _write(tmp_path / "project" / "models.py", MODELS)
    evaluate = _write(tmp_path / "project" / "evaluate.py", EVALUATE_WITH_MISSING_SETTINGS)  # no settings.py
    findings = lint_source(evaluate.read_bytes(), str(evaluate), [RULES["DL301"]]).findings
    (verified,) = verifier.verify(findings, lambda display: Path(display).read_text(encoding="utf-8"))
    assert verified.verification.status == "inconclusive"
    assert verified.verification.evidence.endswith(
        "(it needs `RUN`, which comes from `from .settings import ...`, a relative import the reproduction does not carry)"
    ), verified.verification.evidence
