from __future__ import annotations

from typing import Sequence

from detachlint.finding import Finding


def render_text(findings: Sequence[Finding], context) -> str:
    """`path:line:col: CODE message` (`path:cell N:line:col` in a notebook),
    one finding a line; `[*]` marks what
    `--fix` repairs; the verifier's verdict on the line below."""
    lines = []
    for finding in findings:
        lines.append(_line(finding, context))
        if finding.verification is not None:
            lines.append(f"    {finding.verification.status}: {finding.verification.evidence}")
    return "".join(line + "\n" for line in lines)


def render_concise(findings: Sequence[Finding], context) -> str:
    """Exactly one `path:line:col: CODE message` line a finding and nothing
    else: the shape editors' problem matchers and `grep` expect."""
    return "".join(_line(f, context) + "\n" for f in findings)


def _line(finding: Finding, context) -> str:
    fixable = finding.fix is not None and (context.unsafe_fixes or finding.fix.applicability == "safe")
    mark = " [*]" if fixable else ""
    return f"{finding.location}: {finding.code}{mark} {finding.message}"
