from __future__ import annotations

from typing import Sequence

from detachlint.finding import Finding


def render_text(findings: Sequence[Finding]) -> str:
    """`path:line:col: CODE message`, one finding a line."""
    lines = []
    for finding in findings:
        lines.append(f"{finding.path}:{finding.line}:{finding.column}: {finding.code} {finding.message}")
        if finding.verification is not None:
            lines.append(f"    {finding.verification.status}: {finding.verification.evidence}")
    return "".join(line + "\n" for line in lines)
