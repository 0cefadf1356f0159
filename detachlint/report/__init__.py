"""Render findings. Each format is a function: findings in, text out."""

from __future__ import annotations

from typing import Callable, Dict, Sequence

from detachlint.finding import Finding
from detachlint.report.json_format import render_json
from detachlint.report.text import render_text

FORMATS: Dict[str, Callable[[Sequence[Finding]], str]] = {
    "text": render_text,
    "json": render_json,
}
