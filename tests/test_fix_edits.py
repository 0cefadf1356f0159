"""A finding's fix is described by regenerating only the top-level statement
that holds it; the edit must be exactly the one the whole file's
regeneration gives."""

from __future__ import annotations

import pytest

from conftest import ROOT

from detachlint.engine import check_module, parse
from detachlint.fixing import FixDescriber, apply_replace, text_edit
from detachlint.registry import load_rules

RULES = list(load_rules().values())
FILES = sorted(ROOT.glob("fixtures/*/*.py")) + sorted(ROOT.glob("examples/*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_local_fix_edits_equal_whole_file_edits(path):
    source = path.read_bytes()
    module, error = parse(source, str(path))
    assert module is not None, error
    checked = check_module(module, source, str(path), RULES)
    describer = FixDescriber(checked.module, checked.facts.names, checked.facts.positions)
    for report, _, _ in checked.reports:
        if report.fix is None:
            continue
        whole = text_edit(checked.module.code, apply_replace(checked.module, checked.facts.names, report.fix).code)
        assert describer.describe(report.fix, "fix").edits == (whole,), report.message


def test_a_fix_in_a_long_file_edits_only_its_own_lines():
    unit = (ROOT / "examples" / "train.py").read_text()
    source = (unit * 40).encode()
    module, _ = parse(source, "long.py")
    checked = check_module(module, source, "long.py", RULES)
    describer = FixDescriber(checked.module, checked.facts.names, checked.facts.positions)
    fixes = [report for report, _, _ in checked.reports if report.fix is not None]
    assert len(fixes) >= 40
    last = fixes[-1]
    edit = describer.describe(last.fix, "fix").edits[0]
    line = checked.facts.positions[last.fix.old].start.line
    assert edit.line >= line - 1 and edit.end_line - edit.line < 20
