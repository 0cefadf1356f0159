"""A notebook as one program (`notebook.py` joins its code cells, each
followed by a marker line): what IPython does with a cell that plain Python
does not, as facts the rules can ask."""

from __future__ import annotations

import ast
import re
from typing import FrozenSet, List

CELL_MARK = "# detachlint-cell: {}"
CELL_MARK_LINE = re.compile(r"^# detachlint-cell: (\d+)$")


def displayed_lines(program: str) -> FrozenSet[int]:
    """Lines of a notebook program holding a cell's last statement when
    IPython displays its value (an expression, no `;` after it): that value
    is shown, not thrown away. Empty for a program that is no notebook."""
    found: List[int] = []
    cell: List[str] = []
    start = 1
    for number, line in enumerate(program.split("\n"), start=1):
        if CELL_MARK_LINE.match(line):
            found += [start - 1 + n for n in cell_displayed_lines(cell)]
            cell, start = [], number + 1
        else:
            cell.append(line)
    return frozenset(found)


def cell_displayed_lines(lines: List[str]) -> List[int]:
    """Lines (1-based) of a cell's last statement when IPython displays its value."""
    try:
        tree = ast.parse("\n".join(lines))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return []
    last = tree.body[-1]
    end = last.end_lineno or last.lineno
    rest = lines[end - 1].encode()[last.end_col_offset or 0:].decode(errors="replace")
    if rest.split("#", 1)[0].strip().startswith(";"):
        return []  # `;` after the value: IPython shows nothing
    return list(range(last.lineno, end + 1))
