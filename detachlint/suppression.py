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
from typing import Dict, Optional, Set

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I)
_IGNORE = re.compile(r"#\s*detachlint:\s*ignore(?:\[(?P<codes>[^\]]*)\])?")
_SKIP_FILE = re.compile(r"^\s*#\s*detachlint:\s*skip-file\b", re.M)

ALL = None  # a bare suppression: every code


def _codes(text: Optional[str]) -> Optional[Set[str]]:
    if text is None:
        return ALL
    return {c.upper() for c in re.split(r"[\s,]+", text) if c}


class Suppressions:
    def __init__(self, source: str) -> None:
        self.skip_file = bool(_SKIP_FILE.search(source)) if "detachlint" in source else False
        self._by_line: Dict[int, Optional[Set[str]]] = {}
        if "noqa" not in source and "detachlint" not in source:
            return
        for number, line in enumerate(source.splitlines(), start=1):
            if "#" not in line:
                continue
            for match in _NOQA.finditer(line):
                self._add(number, _codes(match.group("codes")))
            for match in _IGNORE.finditer(line):
                codes = _codes(match.group("codes"))
                self._add(number, codes)
                if line.lstrip().startswith("#"):
                    self._add(number + 1, codes)

    def _add(self, line: int, codes: Optional[Set[str]]) -> None:
        if line in self._by_line:
            old = self._by_line[line]
            self._by_line[line] = ALL if old is ALL or codes is ALL else old | codes
        else:
            self._by_line[line] = codes

    def suppresses(self, line: int, code: str) -> bool:
        if line not in self._by_line:
            return False
        codes = self._by_line[line]
        return codes is ALL or any(code.startswith(given) for given in codes)
