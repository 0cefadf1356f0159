"""Render findings. Each format is a function: findings and a context in, text out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, Mapping, Sequence, Type

from detachlint.finding import Finding
from detachlint.report.github import render_github
from detachlint.report.html import render_html
from detachlint.report.json_format import render_json, render_jsonl
from detachlint.report.junit import render_junit
from detachlint.report.sarif import render_sarif
from detachlint.report.text import render_concise, render_text


@dataclass(frozen=True)
class ReportContext:
    """What a format may need beyond the findings."""

    rules: Mapping[str, Type] = field(default_factory=dict)  # code -> Rule class (SARIF metadata)
    files: Sequence[str] = ()  # every file linted, as displayed (JUnit: one testcase each)
    errors: Sequence[str] = ()  # files that could not be linted
    unsafe_fixes: bool = False  # whether unsafe fixes count as applicable


Renderer = Callable[[Sequence[Finding], ReportContext], str]

FORMATS: Dict[str, Renderer] = {
    "text": render_text,
    "concise": render_concise,
    "json": render_json,
    "jsonl": render_jsonl,
    "sarif": render_sarif,
    "github": render_github,
    "junit": render_junit,
    "html": render_html,
}


def is_fixable(finding: Finding, unsafe_fixes: bool) -> bool:
    return finding.fix is not None and (unsafe_fixes or finding.fix.applicability == "safe")
