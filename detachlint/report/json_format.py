from __future__ import annotations

import json
from typing import Sequence

from detachlint.finding import Finding


def render_json(findings: Sequence[Finding], context) -> str:
    """One JSON array; the keys are a stable contract (see the README)."""
    return json.dumps([finding.to_json() for finding in findings], indent=2) + "\n"


def render_jsonl(findings: Sequence[Finding], context) -> str:
    """One JSON object a line, the same keys as `json`: streams and appends."""
    return "".join(json.dumps(finding.to_json()) + "\n" for finding in findings)
