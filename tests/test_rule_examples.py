"""Every rule's own examples, and its docstring's Example / Use instead."""

from __future__ import annotations

import re
import textwrap

import pytest

from detachlint.fixer import fix_source

from detachlint.engine import lint_source
from detachlint.registry import load_rules

RULES = load_rules()


def _cases():
    for code, rule in RULES.items():
        for i, example in enumerate(rule.examples("valid")):
            yield pytest.param(rule, "valid", example, id=f"{code}-valid-{i}")
        for i, example in enumerate(rule.examples("invalid")):
            yield pytest.param(rule, "invalid", example, id=f"{code}-invalid-{i}")


def _with(rule):
    # A rule about suppressions judges what the other rules found: all of them run.
    return list(RULES.values()) if getattr(rule, "judges_suppressions", False) else [rule]


def _findings(rule, source: str):
    result = lint_source(source.encode(), "example.py", _with(rule))
    assert not result.errors, result.errors
    return [f for f in result.findings if f.code == rule.code]


@pytest.mark.parametrize("rule, kind, example", list(_cases()))
def test_example(rule, kind, example):
    found = _findings(rule, example.source)
    if kind == "valid":
        assert found == [], f"valid example flagged:\n{example.source}\n{found}"
        return
    assert found, f"invalid example not flagged:\n{example.source}"
    if example.line is not None:
        assert example.line in [f.line for f in found], found
    if example.column is not None:
        assert (example.line, example.column) in [(f.line, f.column) for f in found], found
    if example.message is not None:
        assert any(example.message in f.message for f in found), [f.message for f in found]
    if example.fixed is not None:
        fixed = textwrap.dedent(example.fixed).strip("\n") + "\n"
        once = fix_source(example.source.encode(), "example.py", _with(rule), unsafe=True)
        assert once.applied and once.source.decode() == fixed
        assert not _findings(rule, fixed), "the fixed code is still flagged"
        assert fix_source(once.source, "example.py", _with(rule), unsafe=True).applied == 0, "fix is not idempotent"
    else:
        assert all(f.fix is None for f in found) or rule.fix_title, "a fix needs a fix_title"


@pytest.mark.parametrize("rule", [r for r in RULES.values() if r.fix_title], ids=lambda r: r.code)
def test_a_rule_with_a_fix_pins_fixed_code(rule):
    assert any(e.fixed for e in rule.examples("invalid")), f"{rule.code} has a fix but no example pins the fixed code"


def _doc_blocks(rule):
    docs = rule.docs()
    example = docs.split("## Example", 1)[1].split("\n## ", 1)[0]
    bad, _, good = example.partition("Use instead:")
    fence = re.compile(r"```python\n(.*?)```", re.S)
    return fence.search(bad).group(1), fence.search(good).group(1)


@pytest.mark.parametrize("rule", RULES.values(), ids=list(RULES))
def test_docstring_example_fires_and_use_instead_does_not(rule):
    bad, good = _doc_blocks(rule)
    assert _findings(rule, bad), f"{rule.code}: the docs' Example is not flagged"
    assert not _findings(rule, good), f"{rule.code}: the docs' Use instead is flagged"
