"""The shape every rule must have."""

from __future__ import annotations

import re

import pytest

from detachlint.registry import builtin_rules_dir, load_rules

from conftest import ROOT

RULES = load_rules()
HEADINGS = ["What it does", "Why is this bad?", "Example", "Not flagged", "Fix safety", "Verification", "References"]


def test_codes_and_names_are_unique():
    names = [rule.name for rule in RULES.values()]
    assert len(names) == len(set(names))
    # DL0xx is about detachlint itself (DL000: the file did not parse; DL001: idle suppressions).
    assert all(re.fullmatch(r"DL(?!000)\d{3}", code) for code in RULES)


@pytest.mark.parametrize("rule", RULES.values(), ids=list(RULES))
def test_rule_shape(rule):
    path = builtin_rules_dir() / f"{rule.code.lower()}_{rule.name.replace('-', '_')}.py"
    assert path.is_file(), f"{rule.code} should live in {path.name}"
    assert re.fullmatch(r"[a-z]+(-[a-z]+)+", rule.name)
    assert not rule.name.startswith(("no-", "avoid-"))
    docs = rule.docs()
    found = re.findall(r"^## (.+)$", docs, re.M)
    assert found == HEADINGS, f"{rule.code} headings: {found}"
    assert "Use instead:" in docs
    assert len(rule.valid) >= 3 and len(rule.invalid) >= 3
    not_flagged = docs.split("## Not flagged", 1)[1].split("\n## ", 1)[0]
    bullets = re.findall(r"^- ", not_flagged, re.M)
    assert len(rule.valid) >= len(bullets), "each look-alike under Not flagged needs a valid example"
    assert not rule.message.endswith("."), "messages end without a period"
    assert (ROOT / "fixtures" / rule.code).is_dir(), f"{rule.code} has no fixture folder"
    assert rule.severity in ("error", "warning", "info")


def test_docs_rules_md_is_up_to_date():
    """docs/rules.md is generated from the docstrings; regenerate it with
    `detachlint rules --format markdown > docs/rules.md` after editing a rule."""
    from detachlint.docs import rules_markdown

    expected = rules_markdown(load_rules())
    written = (ROOT / "docs" / "rules.md").read_text()
    assert written == expected, "docs/rules.md is out of date: run `detachlint rules --format markdown > docs/rules.md`"


def test_docs_rules_md_has_every_section():
    written = (ROOT / "docs" / "rules.md").read_text()
    for code, rule in load_rules().items():
        assert f"\n## {code} {rule.name}\n" in written
    for heading in ("What it does", "Why is this bad?", "Example", "Not flagged", "Fix safety", "Verification"):
        assert written.count(f"### {heading}") >= 3
