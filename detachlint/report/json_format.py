from __future__ import annotations

import json
from typing import Sequence

from detachlint.finding import Finding


def render_json(findings: Sequence[Finding], unsafe_fixes: bool = False) -> str:
    """One JSON array; the keys are a stable contract (see DESIGN.md)."""
    return json.dumps([finding.to_json() for finding in findings], indent=2) + "\n"
