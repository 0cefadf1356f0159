"""Inline suppressions: `# noqa`, `# detachlint: ignore[...]`, `skip-file`.

`# noqa` and `# noqa: DL101, DL201` apply to their own line, as in flake8
and ruff; a code may be a prefix (`# noqa: DL3` covers DL301 and DL302) and
any case (`# noqa: dl301`). `# detachlint: ignore` and `# detachlint: ignore[DL101]` apply to
their own line or, written on a line of their own, to the next line.
Codes of other tools in a `noqa` list (`# noqa: E501`) suppress nothing of
ours.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Set, Tuple

from detachlint.analysis.positions import LINE_BREAK

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I)
_IGNORE = re.compile(r"#\s*detachlint:\s*ignore(?:\[(?P<codes>[^\]]*)\])?")
_SKIP_FILE = re.compile(r"^\s*#\s*detachlint:\s*skip-file\b", re.M)

ALL = None  # a bare suppression: every code


def _codes(text: Optional[str]) -> Optional[Set[str]]:
    if text is None:
        return ALL
    return {c.upper() for c in re.split(r"[\s,]+", text) if c}


@dataclass
class Suppression:
    """One suppression comment and what it silenced."""

    line: int  # where the comment is
    text: str  # the comment's suppression part, as written
    codes: Optional[Set[str]]  # ALL for a bare one
    covers: Tuple[int, ...]  # the lines it applies to
    bare_noqa: bool = False  # `# noqa` without codes: maybe another tool's
    used: Set[str] = field(default_factory=set)  # codes given that silenced a finding ("*" for bare)


def skips_file(source: str) -> bool:
    """Whether `source` says `# detachlint: skip-file` on a line of its own."""
    return bool(_SKIP_FILE.search(source)) if "detachlint" in source else False


class Suppressions:
    def __init__(self, source: str, first_line: int = 1) -> None:
        self.skip_file = skips_file(source)
        self.comments: List[Suppression] = []
        self._by_line: Dict[int, List[Suppression]] = {}
        if "noqa" not in source and "detachlint" not in source:
            return
        for number, line in enumerate(LINE_BREAK.split(source), start=first_line):
            if "#" not in line:
                continue
            for match in _NOQA.finditer(line):
                codes = _codes(match.group("codes"))
                self._add(Suppression(number, match.group(0), codes, (number,), bare_noqa=codes is ALL))
            for match in _IGNORE.finditer(line):
                covers = (number, number + 1) if line.lstrip().startswith("#") else (number,)
                self._add(Suppression(number, match.group(0), _codes(match.group("codes")), covers))

    def _add(self, suppression: Suppression) -> None:
        self.comments.append(suppression)
        for line in suppression.covers:
            self._by_line.setdefault(line, []).append(suppression)

    def suppresses(self, line: int, code: str) -> bool:
        for suppression in self._by_line.get(line, ()):
            if suppression.codes is ALL:
                suppression.used.add("*")
                return True
            for given in suppression.codes:
                if code.startswith(given):
                    suppression.used.add(given)
                    return True
        return False

    def unused(self, enabled: Sequence[str]) -> List[Tuple[Suppression, List[str]]]:
        """Comments that silenced nothing in this run, with the codes of
        ours that did nothing: only codes whose rules ran can be judged, and
        a bare `# noqa` may be another tool's."""
        found = []
        for suppression in self.comments:
            if suppression.codes is ALL:
                if not suppression.bare_noqa and not suppression.used:
                    found.append((suppression, []))
                continue
            idle = [
                given
                for given in sorted(suppression.codes)
                if given.startswith("DL") and given not in suppression.used and any(code.startswith(given) for code in enabled)
            ]
            if idle:
                found.append((suppression, idle))
        return found
