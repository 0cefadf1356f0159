"""A long file, cut into sections of whole top-level statements.

libcst's tree of a whole file takes about 500 bytes of memory per byte of
code, and its parse slows as the file grows: 5.6 s per MB and 2.7 GB for a
5 MB file, 3.1 s per MB in pieces of 100 KB. A file longer than
`SECTION_BYTES` is therefore analysed a section at a time
(`engine.lint_source`), each section's tree and facts freed before the next
is parsed: memory stays that of one section, and time grows with the file.
A section is followed by the imports of the sections before it, so `nn`
still means `torch.nn` there.
What one section says of another (a helper defined in one and called in
the next, a model built in one and trained in another) is not seen.
"""

from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass
from typing import Dict, Iterator

from detachlint.analysis.positions import LINE_BREAK

SECTION_BYTES = 128 * 1024  # 1 MB of code in 10.5 s and 153 MB; 256 KiB: 11.6 s, 250 MB

# Where a top-level statement may start: a line with code at its first
# column that does not continue the statement before it. Python's parser
# confirms each cut (a cut inside a string or brackets leaves the code
# before it unparsable).
_MAY_START = re.compile(r"^(?![ \t\f\r\n#)\]}]|(?:else|elif|except|finally)\b)", re.M)


@dataclass
class Section:
    first_line: int  # the file's line the section starts on
    last_line: int  # and the last line it holds
    code: str  # its statements, then the imports of the sections before it


def sections(text: str, size: int = SECTION_BYTES) -> Iterator[Section]:
    """`text` in sections of whole top-level statements, each about `size`
    characters or more. Raises SyntaxError (its line the file's) when Python
    cannot parse the code from some cut to the end of the file."""
    starts = [match.start() for match in _MAY_START.finditer(text)]
    imports: Dict[str, None] = {}  # each import once, in order
    begin, line = 0, 1
    while begin < len(text):
        first = bisect.bisect_left(starts, begin + size)
        tries = 0
        while True:
            # After a failed cut, the next candidate, then past 8 failures
            # every other, every fourth, ...: a long string full of
            # code-like lines costs few parses.
            at = first + (tries if tries <= 8 else 1 << (tries - 5))
            end = starts[at] if at < len(starts) else len(text)
            own = text[begin:end]
            try:
                tree = ast.parse(own)
                break
            except SyntaxError as error:
                if end == len(text):
                    if error.lineno is not None:
                        error.lineno += line - 1
                    raise
                tries += 1
        lines = len(LINE_BREAK.findall(own))
        last = line + lines - (0 if own and own[-1] not in "\r\n" else 1)
        before = "\n".join(imports)
        code = own if not before else own + ("" if own.endswith(("\n", "\r")) else "\n") + before + "\n"
        yield Section(line, last, code)
        imports.update((ast.unparse(node), None) for node in tree.body if _carried(node))
        begin, line = end, line + lines


def _carried(node: ast.stmt) -> bool:
    """An import the later sections keep (a `__future__` one cannot follow code)."""
    if isinstance(node, ast.Import):
        return True
    return isinstance(node, ast.ImportFrom) and node.module != "__future__"
