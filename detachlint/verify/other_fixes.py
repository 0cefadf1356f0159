"""Another finding's fix, carried into a reproduction that stops on it.

A reproduction of finding A runs the file's code, which may hold another
finding B that stops every run before A's hazard is reached: a torch
0.3-era `loss.data[0]` raises "invalid index of a 0-dim tensor" on today's
0-dim loss (DL103). When A's first run is inconclusive, the verifier runs
A again on the file with B's fix applied, and names the fix in A's
evidence when the result differs (the runs are seeded, so only the fixed
line can make it differ).

The rule that keeps such a verdict on the user's own code (basis
`user-code`):

- B's fix is one edit within one line, so every line number of A's
  reproduction stays that of the file;
- the fixed line is not on A's own statement: A is judged on its code as
  written;
- the fix keeps the program's meaning in the torch version it was written
  for (`KEEPS_MEANING`): torch 0.3's `x.data[0]` of a 1-element loss read
  the number `x.item()` reads today, and on a value with more elements
  `.item()` raises rather than read another one.

Any other fix would replace part of the user's program, so it is never
applied.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from detachlint.finding import Finding

# (rule code, a fragment of the message's kind): fixes that say what the
# code meant in the torch version it was written for.
KEEPS_MEANING = {
    ("DL103", "indexes a 0-dim tensor"),
}


@dataclass(frozen=True)
class OtherFix:
    line: int
    start: int  # 0-based character offsets in the line
    end: int
    content: str
    code: str
    old: str  # the expression as written (`loss.data[0]`)
    new: str  # and as fixed (`loss.item()`)

    def note(self) -> str:
        return f"with line {self.line}'s `{self.old}` read as `{self.new}`, the fix of its own {self.code} finding"


def _statement_lines(tree: ast.Module, line: int, end_line: int) -> Tuple[int, int]:
    """The lines of the innermost statement holding `line` (a compound
    statement's header only), widened to the finding's own end."""
    first, last = line, max(line, end_line)
    body: Sequence[ast.stmt] = tree.body
    while True:
        holder = next((s for s in body if s.lineno <= line <= (s.end_lineno or s.lineno)), None)
        if holder is None:
            return first, last
        inner = [b for b in (getattr(holder, f, None) for f in ("body", "orelse", "finalbody")) if isinstance(b, list) and b]
        inner += [h.body for h in getattr(holder, "handlers", ()) if h.body]
        header_end = min((b[0].lineno for b in inner), default=(holder.end_lineno or holder.lineno) + 1) - 1
        if line <= header_end or not inner:
            return min(first, holder.lineno), max(last, header_end if inner else holder.end_lineno or holder.lineno)
        body = [s for b in inner for s in b]


def _widened(text: str, start: int, end: int, node_start: int, node_end: int) -> Tuple[int, int]:
    """The edit's span widened to the finding's own node on the line, so the
    evidence quotes a whole expression (`loss.data[0]`, not `data[0]`)."""
    return min(start, node_start), max(end, min(node_end, len(text)))


def candidates(finding: Finding, findings: Sequence[Finding], source: str) -> List[OtherFix]:
    """The fixes of the file's other findings that A's run may carry."""
    lines = source.splitlines()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    own = _statement_lines(tree, finding.line, finding.end_line)
    found: List[OtherFix] = []
    for other in findings:
        if other is finding or other.path != finding.path or other.fix is None or other.cell is not None:
            continue
        if not any(other.code == code and fragment in other.message for code, fragment in KEEPS_MEANING):
            continue
        if other.fix.applicability != "safe" or len(other.fix.edits) != 1:
            continue
        edit = other.fix.edits[0]
        if edit.line != edit.end_line or edit.line != other.line or "\n" in edit.content:
            continue  # it adds or removes lines, or it is not on the finding's own line
        if own[0] <= edit.line <= own[1] or not 1 <= edit.line <= len(lines):
            continue
        text = lines[edit.line - 1]
        start, end = edit.column - 1, edit.end_column - 1
        if not 0 <= start <= end <= len(text):
            continue
        node_end = other.end_column - 1 if other.end_line == other.line else len(text)
        if not other.column - 1 <= start <= node_end:
            continue  # the edit is not where the finding is (a notebook cell's own lines)
        wide_start, wide_end = _widened(text, start, end, other.column - 1, node_end)
        fixed = text[:start] + edit.content + text[end:]
        shift = len(edit.content) - (end - start)
        found.append(
            OtherFix(
                line=edit.line,
                start=start,
                end=end,
                content=edit.content,
                code=other.code,
                old=text[wide_start:wide_end],
                new=fixed[wide_start:wide_end + shift],
            )
        )
    return found


def applied(source: str, fixes: Sequence[OtherFix]) -> Optional[str]:
    """`source` with the fixes in (right to left on a line, so the columns
    of the others hold); None when two overlap or the result does not parse."""
    lines = source.splitlines(keepends=True)
    ordered = sorted(fixes, key=lambda f: (f.line, f.start), reverse=True)
    for fix, after in zip(ordered, [None, *ordered]):
        if after is not None and after.line == fix.line and fix.end > after.start:
            return None
        line = lines[fix.line - 1]
        lines[fix.line - 1] = line[: fix.start] + fix.content + line[fix.end :]
    text = "".join(lines)
    try:
        ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    return text


def carried(spec: dict, fixes: Sequence[OtherFix]) -> List[OtherFix]:
    """The fixes whose line the reproduction carries, with the fixed text."""
    kept = []
    for fix in fixes:
        for block in spec.get("blocks", ()):
            first = block["line"]
            last = first + block["text"].count("\n")
            if first <= fix.line <= last and fix.new in block["text"]:
                kept.append(fix)
                break
    return kept


def note(fixes: Sequence[OtherFix]) -> str:
    """What A's evidence adds: the fixes its run carried."""
    return " (" + "; ".join(f.note() for f in fixes) + ")"
