from __future__ import annotations

import textwrap

import pytest

from detachlint.engine import lint_source
from detachlint.registry import load_rules
from detachlint.suppression import Suppressions

RULES = [r for r in load_rules().values() if not getattr(r, "judges_suppressions", False)]

BODY = """\
import torch

def train_step(model, x, y, criterion):
    prob = torch.sigmoid(model(x))
    prob.data.clamp_(0.05, 0.95){comment}
    loss = criterion(prob, y)
    loss.backward()
"""


def _codes(source: str):
    return [f.code for f in lint_source(source.encode(), "t.py", RULES).findings]


@pytest.mark.parametrize(
    "comment, suppressed",
    [
        ("", False),
        ("  # noqa", True),
        ("  # noqa: DL101", True),
        ("  # noqa:DL101,DL301", True),
        ("  # noqa: E501", False),
        ("  # noqa: DL201", False),
        ("  # detachlint: ignore", True),
        ("  # detachlint: ignore[DL101]", True),
        ("  # detachlint: ignore[DL301]", False),
        ("  # noqa: dl101", True),
        ("  # noqa: DL1", True),
        ("  # noqa: DL10", True),
        ("  # noqa: DL3", False),
        ("  # noqa: DL1010", False),
        ("  # detachlint: ignore[dl1]", True),
    ],
)
def test_same_line(comment, suppressed):
    assert _codes(BODY.format(comment=comment)) == ([] if suppressed else ["DL101"])


def test_ignore_comment_on_the_line_above():
    source = BODY.format(comment="").replace(
        "    prob.data.clamp_", "    # detachlint: ignore[DL101]\n    prob.data.clamp_"
    )
    assert _codes(source) == []


def test_noqa_on_the_line_above_does_not_apply():
    source = BODY.format(comment="").replace("    prob.data.clamp_", "    # noqa: DL101\n    prob.data.clamp_")
    assert _codes(source) == ["DL101"]


def test_skip_file():
    assert _codes("# detachlint: skip-file\n" + BODY.format(comment="")) == []
    assert Suppressions("x = 1  # not a detachlint: skip-file\n").skip_file is False


def test_unused_suppressions_are_reported_only_when_asked(tmp_path):
    from conftest import run_cli

    (tmp_path / "t.py").write_text(BODY.format(comment="  # noqa: DL101, DL301").replace("prob.data.clamp_", "prob.clamp_"))
    assert run_cli("check", "t.py", cwd=tmp_path).returncode == 0
    result = run_cli("check", "t.py", "--extend-select", "DL001", "--format", "concise", cwd=tmp_path)
    assert result.stdout.decode().splitlines() == [
        "t.py:5:30: DL001 [*] `# noqa: DL101, DL301` silences nothing here: no DL101, DL301 finding on this line"
    ]
    run_cli("check", "t.py", "--extend-select", "DL001", "--fix", cwd=tmp_path)
    assert "noqa" not in (tmp_path / "t.py").read_text()
