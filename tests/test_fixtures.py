"""Realistic fixture files: markers say what must fire, snapshots what it says.

`fixtures/<CODE>/<scenario>.py` is linted with that rule alone; each line
ending in `# error: <CODE>` must be flagged and no other line. The rendering
is compared with `<scenario>.snap` (update with `pytest --update-snapshots`).
`fixtures/projects/` files are linted with every rule on.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from detachlint.api import unified_diff
from detachlint.engine import lint_source
from detachlint.fixer import fix_source
from detachlint.registry import load_rules
from detachlint.report import ReportContext
from detachlint.report.text import render_text

from conftest import ROOT

FIXTURES = ROOT / "fixtures"
RULES = load_rules()
MARKER = re.compile(r"#\s*error:\s*(?P<codes>DL\d{3}(?:\s*,\s*DL\d{3})*)")


def _scenarios():
    for path in sorted(FIXTURES.glob("*/*.py")):
        yield pytest.param(path, id=f"{path.parent.name}/{path.stem}")


def _expected(source: str):
    expected = set()
    for number, line in enumerate(source.splitlines(), start=1):
        match = MARKER.search(line)
        if match:
            for code in re.split(r"\s*,\s*", match.group("codes")):
                expected.add((number, code))
    return expected


@pytest.mark.parametrize("path", list(_scenarios()))
def test_fixture(path: Path, update_snapshots: bool):
    source = path.read_text(encoding="utf-8")
    assert source.lstrip().startswith('"""'), f"{path.name} should open with a docstring"
    if path.parent.name == "projects":
        rules = list(RULES.values())
    elif getattr(RULES[path.parent.name], "judges_suppressions", False):
        # It judges the suppressions of the rules a user runs: the default ones.
        rules = [r for r in RULES.values() if r.default_enabled] + [RULES[path.parent.name]]
    else:
        rules = [RULES[path.parent.name]]
    display = path.relative_to(ROOT).as_posix()
    result = lint_source(source.encode(), display, rules)
    assert not result.errors
    found = {(f.line, f.code) for f in result.findings}
    assert found == _expected(source), render_text(result.findings, ReportContext())
    snapshot = path.with_suffix(".snap")
    rendered = render_text(result.findings, ReportContext(unsafe_fixes=True))
    if any(f.fix for f in result.findings):
        # Every fix (unsafe ones too) as one diff; the result must parse,
        # lose the fixed findings and be stable under a second --fix.
        fixed = fix_source(source.encode(), display, rules, unsafe=True)
        rendered += "\n" + unified_diff(display, source.encode(), fixed.source)
        again = lint_source(fixed.source, display, rules).findings
        assert not [f for f in again if f.fix], "fixable findings left after --fix"
        assert fix_source(fixed.source, display, rules, unsafe=True).applied == 0
    if update_snapshots:
        snapshot.write_text(rendered, encoding="utf-8")
    assert snapshot.exists(), f"no snapshot for {display}: run pytest --update-snapshots and review it"
    assert rendered == snapshot.read_text(encoding="utf-8")


def test_enough_scenarios():
    positives = [p for p in FIXTURES.glob("DL*/*.py") if "# error:" in p.read_text()]
    negatives = [p for p in FIXTURES.glob("DL*/*.py") if "# error:" not in p.read_text()]
    assert len(positives) >= 12 and len(negatives) >= 12, (len(positives), len(negatives))
    for code in RULES:
        if RULES[code].default_enabled:
            assert any(p.parent.name == code for p in positives), f"{code} has no positive fixture"
