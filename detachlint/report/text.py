from __future__ import annotations

from typing import Sequence

from detachlint.finding import Finding


def render_text(findings: Sequence[Finding], unsafe_fixes: bool = False) -> str:
    """`path:line:col: CODE message`, one finding a line; `[*]` marks what `--fix` repairs."""
    lines = []
    for finding in findings:
        fixable = finding.fix is not None and (unsafe_fixes or finding.fix.applicability == "safe")
        mark = " [*]" if fixable else ""
        lines.append(f"{finding.path}:{finding.line}:{finding.column}: {finding.code}{mark} {finding.message}")
        if finding.verification is not None:
            lines.append(f"    {finding.verification.status}: {finding.verification.evidence}")
    return "".join(line + "\n" for line in lines)
