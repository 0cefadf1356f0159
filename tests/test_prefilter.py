"""The byte-level prefilter must never skip a file on which a rule fires."""

from __future__ import annotations

import pytest

from detachlint.engine import check_module, might_need_linting, parse
from detachlint.registry import load_rules

from conftest import ROOT

RULES = load_rules()


def _flagged_sources():
    for code, rule in RULES.items():
        for i, example in enumerate(rule.examples("invalid")):
            yield pytest.param(example.source.encode(), id=f"{code}-invalid-{i}")
    for path in sorted(ROOT.glob("fixtures/*/*.py")) + sorted(ROOT.glob("examples/*.py")):
        yield pytest.param(path.read_bytes(), id=path.relative_to(ROOT).as_posix())


@pytest.mark.parametrize("source", list(_flagged_sources()))
def test_prefilter_keeps_every_file_a_rule_flags(source):
    # Lint without the prefilter, then ask it about the same bytes.
    module, _ = parse(source, "x.py")
    checked = check_module(module, source, "x.py", list(RULES.values()))
    if checked.reports:
        assert might_need_linting(source)


def test_prefilter_skips_files_without_torch():
    assert not might_need_linting(b"import numpy as np\nx = np.zeros(3)\n")
