"""A long file is analysed a section of top-level statements at a time
(`detachlint/sections.py`): its findings, positions, fixes and suppressions
are those of the file analysed whole, and only its memory differs."""

from __future__ import annotations

import ast
import re

import pytest

from conftest import ROOT, run_cli
from detachlint import engine
from detachlint.registry import load_rules
from detachlint.sections import sections

RULES = [rule for rule in load_rules().values() if rule.default_enabled]
UNIT = (ROOT / "examples" / "train.py").read_text()
IMPORTS = "import torch\nfrom torch import nn\n\nfrom models import Classifier\n"


def _long_file(copies: int) -> str:
    """The example training file again and again, its imports only at the
    top: a later section knows `nn` only from the imports it is given."""
    assert IMPORTS in UNIT
    return UNIT + "".join("\n" + UNIT.replace(IMPORTS, "") for _ in range(copies - 1))


def _lines(text: str, first: int, last: int) -> str:
    return "".join(re.split(r"(?<=\n)", text)[first - 1 : last])


TRICKY = '''\
"""A module docstring.
def not_code():
    pass
"""
from __future__ import annotations
import torch
x = [
1,
2,
]
y = 1 + \\
2
if x:
    pass
else:
    pass
try:
    import numpy
except ImportError:
    numpy = None
finally:
    pass


@torch.no_grad()
def f():
    return """
class NotAClass:
    pass
"""
from torch import nn
'''


def test_sections_cover_the_file_and_cut_only_between_statements():
    found = list(sections(TRICKY, 1))
    assert "".join(_lines(TRICKY, s.first_line, s.last_line) for s in found) == TRICKY
    assert [s.first_line for s in found] == [1, 5, 6, 7, 11, 13, 17, 25, 31]
    for section in found:
        own = _lines(TRICKY, section.first_line, section.last_line)
        assert section.code.startswith(own)
        ast.parse(section.code)  # every section is whole code


def test_a_section_is_followed_by_the_imports_before_it_each_once():
    found = list(sections(TRICKY + "import torch\nz = 1\n", 1))
    assert found[1].code == "from __future__ import annotations\n"  # its own: nothing carried yet
    assert found[-1].code == "z = 1\nimport torch\nfrom torch import nn\n"  # no `__future__`, `torch` once, none from inside `try`


def test_a_syntax_error_is_raised_at_its_line_in_the_file():
    text = "import torch\n" + "x = 1\n" * 200 + "def broken(:\n    pass\n"
    with pytest.raises(SyntaxError) as raised:
        list(sections(text, 100))
    assert raised.value.lineno == 202


@pytest.fixture
def small_sections(monkeypatch):
    monkeypatch.setattr(engine, "SECTION_BYTES", 2048)


def _as_tuples(result):
    return [(f.code, f.line, f.column, f.end_line, f.end_column, f.message, f.fix) for f in result.findings]


def test_a_long_file_has_the_findings_of_the_whole_file(small_sections, monkeypatch):
    source = _long_file(12)
    cut = engine.lint_source(source.encode(), "long.py", RULES)
    monkeypatch.setattr(engine, "SECTION_BYTES", 10**9)
    whole = engine.lint_source(source.encode(), "long.py", RULES)
    assert len(list(sections(source, 2048))) >= 4
    assert not cut.errors and not whole.errors
    assert _as_tuples(cut) == _as_tuples(whole)
    assert len(cut.findings) == 24  # the .data edit and the evaluation loop, in every copy
    lines = source.splitlines()
    for finding in cut.findings:
        expected = "prob.data.clamp_(" if finding.code == "DL101" else "logits = model("
        assert expected in lines[finding.line - 1]
    assert any(f.fix for f in cut.findings)


def test_suppressions_and_skip_file_hold_in_every_section(small_sections):
    source = _long_file(12)
    last = [i for i, line in enumerate(source.splitlines()) if "prob.data.clamp_(" in line][-1]
    lines = source.splitlines()
    lines[last] += "  # noqa: DL101"
    result = engine.lint_source("\n".join(lines).encode(), "long.py", RULES)
    assert [f.line for f in result.findings if f.code == "DL101"][-1] < last + 1
    assert len(result.findings) == 23
    skipped = engine.lint_source(("# detachlint: skip-file\n" + source).encode(), "long.py", RULES)
    assert skipped.findings == []


def test_a_syntax_error_late_in_a_long_file_is_its_one_finding(small_sections):
    source = _long_file(12) + "\ndef broken(:\n    pass\n"
    result = engine.lint_source(source.encode(), "long.py", RULES)
    assert [(f.code, f.line) for f in result.findings] == [("DL000", source.count("\n") - 1)]


def test_a_file_in_another_encoding_is_analysed_whole(small_sections, monkeypatch):
    source = "# -*- coding: latin-1 -*-\n# caf\xe9\n" + _long_file(6)
    monkeypatch.setattr(engine, "sections", lambda *args: pytest.fail("a latin-1 file was cut"))
    result = engine.lint_source(source.encode("latin-1"), "long.py", RULES)
    assert len(result.findings) == 12


def test_the_command_line_lints_a_file_longer_than_a_section(tmp_path):
    source = _long_file(120)
    assert len(source.encode()) > engine.SECTION_BYTES
    (tmp_path / "long.py").write_text(source)
    result = run_cli("check", "long.py", "--no-cache", "--format", "concise", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stderr == b""
    reported = result.stdout.decode().splitlines()
    lines = source.splitlines()
    last_clamp = max(i for i, line in enumerate(lines, 1) if "prob.data.clamp_(" in line)
    assert f"long.py:{last_clamp}:9: DL101" in "\n".join(reported)
    assert sum(" DL101 " in line for line in reported) == 120


def test_what_a_long_file_tells_the_others_comes_from_every_section(small_sections, tmp_path):
    from test_project import MAIN_SUMS_WHAT_STEPS_RETURN, STEPS, findings, write

    write(tmp_path, {"steps.py": _long_file(6) + "\n" + STEPS, "train.py": MAIN_SUMS_WHAT_STEPS_RETURN})
    assert len(list(sections((tmp_path / "steps.py").read_text(), 2048))) >= 3
    # `train_step`, in the last section, returns its loss with the graph.
    assert [f for f in findings(tmp_path) if f[0] == "train.py"] == [("train.py", 10, "DL401")]
