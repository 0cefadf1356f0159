"""Jupyter notebooks: the code cells, in order, as one program.

A notebook (nbformat 4) is JSON; its code cells are joined into one Python
program with a marker comment after each cell, so rules see the notebook as
it runs (a model defined in cell 2 and evaluated in cell 7). IPython syntax
that is not Python (`%magic`, `!shell`, `x = !cmd`, `obj?`, a `%%bash` cell)
becomes a `pass` carrying its index, which keeps the line count and the
indentation, and is put back verbatim when a fixed program is turned back
into cells. Findings are located by cell and by line within the cell.

The standard library's json reads and writes the file: the notebook is
written back with its own indentation and key order, so only the changed
cells' sources differ (nbformat's writer would sort every key and reindent).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field, replace
from typing import List, Optional, Tuple

from detachlint.analysis.cells import CELL_MARK, CELL_MARK_LINE
from detachlint.finding import Edit, Finding

SUFFIX = ".ipynb"
_MAGIC_MARK = "pass  # detachlint-magic: {}"
_MAGIC_MARK_LINE = re.compile(r"^(\s*)pass  # detachlint-magic: (\d+)$")
# Lines IPython transforms before Python sees them.
_MAGIC = re.compile(r"^\s*(?:[%!?]|[\w.*]+\?\??\s*$)|^\s*[\w.]+(?:\s*,\s*[\w.]+)*\s*=\s*[%!]")
# Where a rule's message names a line of the program.
_LINE_IN_MESSAGE = re.compile(r"\bline (\d+)\b")
# Cell magics whose body is Python all the same.
_PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug", "memit", "px", "autoreload"}


class NotebookError(ValueError):
    """Not a notebook this linter can read; the message says why."""


def is_notebook(path: str) -> bool:
    return path.lower().endswith(SUFFIX)


@dataclass(frozen=True)
class Span:
    cell: int  # 1-based position among all the notebook's cells
    start: int  # program line of the cell's first line
    lines: int  # how many lines the cell has
    # The indentation IPython takes off a cell whose first line is indented,
    # per line (0 where the line did not start with it).
    dedent: Tuple[int, ...] = ()

    def indent_of(self, line: int) -> int:
        """Columns taken off the cell's `line` (1-based)."""
        return self.dedent[line - 1] if 0 < line <= len(self.dedent) else 0


@dataclass
class Program:
    """A notebook's code cells as one Python program, and the way back."""

    notebook: dict
    raw: str  # the notebook's text as read
    text: str  # the program
    spans: List[Span]
    magics: List[str]  # original text of each IPython line, by index
    # Cells that are not Python (a syntax error, an exercise's blank): each
    # is left out of the program, so the other cells are still linted.
    cell_errors: List[Tuple[int, int, int, str]] = field(default_factory=list)  # (cell, line, column, message)

    @classmethod
    def from_bytes(cls, data: bytes) -> Optional["Program"]:
        """The program, or None for a notebook in another language."""
        try:
            raw = data.decode("utf-8-sig")
            notebook = json.loads(raw)
        except (UnicodeDecodeError, ValueError) as error:
            raise NotebookError(f"not a notebook: the file is not valid JSON ({error})") from None
        if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
            if isinstance(notebook, dict) and "worksheets" in notebook:
                raise NotebookError("nbformat 3 notebooks are not read; `jupyter nbconvert --to notebook` upgrades it")
            raise NotebookError("not a notebook: no list of cells")
        language = _language(notebook)
        if language not in (None, "python"):
            return None
        lines: List[str] = []
        spans: List[Span] = []
        magics: List[str] = []
        errors: List[Tuple[int, int, int, str]] = []
        for number, cell in enumerate(notebook["cells"], start=1):
            if not isinstance(cell, dict) or cell.get("cell_type") != "code":
                continue
            source = _source_text(cell.get("source", ""))
            cell_lines, dedent = _leading_indent(source.split("\n"))
            span = Span(number, len(lines) + 1, len(cell_lines), dedent if any(dedent) else ())
            spans.append(span)
            hidden = _hide_magics(cell_lines, magics)
            error = _syntax_error("\n".join(hidden))
            if error is not None:
                line, column, message = error
                errors.append((number, line, column + span.indent_of(line), message))
                hidden = [_hidden(line, magics, whole_cell=True) for line in cell_lines]
            lines.extend(hidden)
            lines.append(CELL_MARK.format(number))
        return cls(notebook, raw, "\n".join(lines) + "\n", spans, magics, errors)

    # Positions ----------------------------------------------------------

    def locate(self, line: int) -> Optional[Tuple[int, int]]:
        """(cell, line in the cell) of a program line; None on a marker."""
        for span in self.spans:
            if span.start <= line < span.start + span.lines:
                return span.cell, line - span.start + 1
        return None

    def program_line(self, cell: int, line: int) -> int:
        span = next(s for s in self.spans if s.cell == cell)
        return span.start + line - 1

    def to_cells(self, finding: Finding) -> Finding:
        """`finding` (program positions) located by cell."""
        where = self.locate(finding.line)
        if where is None:
            return finding
        cell, line = where
        end = self.locate(finding.end_line)
        end_line = end[1] if end and end[0] == cell else line
        span = self._span(cell)
        fix = finding.fix
        if fix is not None:
            edits = [self._edit_to_cell(e, cell) for e in fix.edits]
            fix = replace(fix, edits=tuple(edits)) if all(edits) else None
        columns = {"column": finding.column + span.indent_of(line)}
        if finding.end_column is not None:
            columns["end_column"] = finding.end_column + span.indent_of(end_line)
        verification = finding.verification
        if verification is not None:
            verification = replace(verification, evidence=self.words(verification.evidence, cell))
        message = self.words(finding.message, cell)
        return replace(finding, cell=cell, line=line, end_line=end_line, fix=fix, message=message, verification=verification, **columns)

    def words(self, text: str, cell: int) -> str:
        """`text` (a message, an evidence sentence) with its program lines
        said as lines of `cell` or of another cell."""
        return _LINE_IN_MESSAGE.sub(lambda m: self._line_words(int(m.group(1)), cell), text)

    def _line_words(self, line: int, cell: int) -> str:
        """A message's `line N`, said in the finding's cell or another."""
        where = self.locate(line)
        if where is None:
            return f"line {line}"
        return f"line {where[1]}" if where[0] == cell else f"cell {where[0]}, line {where[1]}"

    def to_program(self, finding: Finding) -> Finding:
        if finding.cell is None:
            return finding
        span = self._span(finding.cell)
        columns = {"column": finding.column - span.indent_of(finding.line)}
        if finding.end_column is not None:
            columns["end_column"] = finding.end_column - span.indent_of(finding.end_line)
        return replace(
            finding,
            cell=None,
            line=self.program_line(finding.cell, finding.line),
            end_line=self.program_line(finding.cell, finding.end_line),
            **columns,
        )

    def _span(self, cell: int) -> Span:
        return next(s for s in self.spans if s.cell == cell)

    def _edit_to_cell(self, edit: Edit, cell: int) -> Optional[Edit]:
        start, end = self.locate(edit.line), self.locate(edit.end_line)
        if start is None or end is None or start[0] != cell or end[0] != cell:
            return None  # a fix reaching across cells cannot be shown in one
        span = self._span(cell)
        if span.dedent and "\n" in edit.content:
            return None  # new lines would need the cell's indentation put back
        return replace(
            edit, line=start[1], end_line=end[1],
            column=edit.column + span.indent_of(start[1]), end_column=edit.end_column + span.indent_of(end[1]),
        )

    def cell_lines(self, cell: int) -> List[str]:
        """The cell's source as its author wrote it (magics, indentation and all)."""
        return _source_text(self.notebook["cells"][cell - 1].get("source", "")).split("\n")

    def json_position(self, cell: int, line: int, column: int) -> Optional[Tuple[int, int]]:
        """(line, column) in the notebook's JSON text of a cell's line and
        column, for editors showing the file as text; None when the layout
        is not one JSON string per source line (then only the cell is known)."""
        lines = self._json_lines()
        key = (cell, line)
        if key not in lines:
            return None
        json_line, start = lines[key]
        return json_line, start + column

    def _json_lines(self) -> dict:
        """(cell, line) -> (JSON line, column of the string's first
        character), found by walking the text for each code cell's source
        strings in order."""
        if hasattr(self, "_json_line_cache"):
            return self._json_line_cache
        found: dict = {}
        text = self.raw
        cursor = 0
        for span in self.spans:
            source = self.notebook["cells"][span.cell - 1].get("source", "")
            parts = source if isinstance(source, list) else [source]
            at = text.find('"source"', cursor)
            if at < 0 or len(parts) < span.lines - 1 or any("\n" in p.rstrip("\n") for p in parts):
                break  # not one string per line: positions unknown from here on
            cursor = at
            for number, part in enumerate(parts, start=1):
                encoded = json.dumps(part, ensure_ascii=False)
                at = text.find(encoded, cursor)
                if at < 0:
                    encoded = json.dumps(part)
                    at = text.find(encoded, cursor)
                if at < 0:
                    break
                found[(span.cell, number)] = (text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1)
                cursor = at + len(encoded)
        self._json_line_cache = found
        return found

    # Writing back -------------------------------------------------------

    def with_program(self, text: str) -> bytes:
        """The notebook's bytes with its code cells replaced by `text`'s
        (a program in this notebook's layout, after fixes)."""
        chunks: dict = {}
        current: List[str] = []
        for line in text.split("\n"):
            mark = CELL_MARK_LINE.match(line)
            if mark:
                chunks[int(mark.group(1))] = current
                current = []
            else:
                current.append(line)
        if current not in ([], [""]) or sorted(chunks) != [s.cell for s in self.spans]:
            raise NotebookError("a fix moved code across cells; the notebook is left as it was")
        notebook = json.loads(self.raw)  # a fresh copy, in the file's key order
        for span in self.spans:
            lines = [self._restore(line) for line in chunks[span.cell]]
            if span.dedent:
                # The indentation IPython takes off, put back: line by line while
                # the cell has as many lines, else on every line that has text.
                width = max(span.dedent)
                prefix = (_source_text(notebook["cells"][span.cell - 1].get("source", "")).split("\n")[0])[:width]
                if len(lines) == span.lines:
                    lines = [prefix[: span.indent_of(n)] + line for n, line in enumerate(lines, start=1)]
                else:
                    lines = [prefix + line if line.strip() else line for line in lines]
            cell = notebook["cells"][span.cell - 1]
            source = "\n".join(lines)
            if source != _source_text(cell.get("source", "")):
                cell["source"] = source.splitlines(keepends=True) if isinstance(cell.get("source"), list) else source
        return dump(notebook, self.raw)

    def _restore(self, line: str) -> str:
        magic = _MAGIC_MARK_LINE.match(line)
        if magic is None:
            return line
        index = int(magic.group(2))
        if index >= len(self.magics):
            raise NotebookError("a fix changed an IPython line; the notebook is left as it was")
        return self.magics[index]


def dump(notebook: dict, like: str) -> bytes:
    """`notebook` as JSON in the layout of the text `like`: its indentation,
    its escaping of non-ASCII text, its final newline."""
    indent = None
    second = like.split("\n", 2)[1] if like.count("\n") >= 1 else ""
    if like.lstrip().startswith("{") and "\n" in like.strip():
        indent = len(second) - len(second.lstrip(" ")) or 1
    ascii_only = like.isascii() and "\\u" in like
    text = json.dumps(notebook, indent=indent, ensure_ascii=ascii_only)
    if like.endswith("\n"):
        text += "\n"
    return text.encode("utf-8")


def _syntax_error(text: str) -> Optional[Tuple[int, int, str]]:
    """(line, column, message) when a cell is not Python, as IPython runs it
    (top-level `await` allowed); None when it parses."""
    try:
        compile(text, "<cell>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    except SyntaxError as error:
        return error.lineno or 1, error.offset or 1, f"cannot parse: {error.msg}"
    except (ValueError, RecursionError, MemoryError) as error:
        return 1, 1, f"cannot parse: {type(error).__name__}"
    return None


def _language(notebook: dict) -> Optional[str]:
    metadata = notebook.get("metadata") or {}
    for key in ("language_info", "kernelspec"):
        info = metadata.get(key)
        if isinstance(info, dict) and isinstance(info.get("language") or info.get("name"), str):
            name = (info.get("language") if key == "kernelspec" else info.get("name")) or ""
            if name:
                return name.lower()
    return None


def _source_text(source) -> str:
    if isinstance(source, list):
        return "".join(str(part) for part in source)
    return str(source)


def _leading_indent(lines: List[str]) -> Tuple[List[str], Tuple[int, ...]]:
    """The cell as IPython runs it: when its first line is indented, that
    indentation is taken off every line that starts with it. The lines, and
    the width taken off each."""
    first = lines[0] if lines else ""
    width = len(first) - len(first.lstrip(" \t"))
    if not width:
        return lines, tuple(0 for _ in lines)
    prefix = first[:width]
    dedent = tuple(width if line.startswith(prefix) else 0 for line in lines)
    return [line[width:] if cut else line for line, cut in zip(lines, dedent)], dedent


def _hide_magics(lines: List[str], magics: List[str]) -> List[str]:
    first = lines[0].strip() if lines else ""
    if first.startswith("%%"):
        name = first[2:].split(None, 1)[0] if len(first) > 2 else ""
        if name not in _PYTHON_CELL_MAGICS:
            return [_hidden(line, magics, whole_cell=True) for line in lines]
        return [_hidden(lines[0], magics)] + _hide_line_magics(lines[1:], magics)
    return _hide_line_magics(lines, magics)


def _hide_line_magics(lines: List[str], magics: List[str]) -> List[str]:
    """IPython's line syntax hidden where IPython sees it: at the start of a
    statement, never inside brackets, a string or a continued line (`% (a, b)`
    continuing a `print('%d' ...` is Python's `%`)."""
    out: List[str] = []
    depth, string, continued = 0, None, False
    for line in lines:
        if depth == 0 and string is None and not continued and _MAGIC.match(line):
            out.append(_hidden(line, magics))
            continue
        out.append(line)
        depth, string, continued = _scan(line, depth, string)
    return out


def _scan(line: str, depth: int, string: Optional[str]) -> Tuple[int, Optional[str], bool]:
    """After `line`: the bracket depth, the triple quote of a string still
    open, and whether a backslash continues the line."""
    index, length = 0, len(line)
    while index < length:
        char = line[index]
        if string is not None:
            if char == "\\":
                index += 2
            elif line.startswith(string, index):
                string, index = None, index + 3
            else:
                index += 1
            continue
        if char == "#":
            break
        if char in "\"'":
            if line.startswith(char * 3, index):
                string, index = char * 3, index + 3
                continue
            index += 1
            while index < length and line[index] != char:
                index += 2 if line[index] == "\\" else 1
            index += 1
            continue
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(depth - 1, 0)
        elif char == "\\" and index == length - 1:
            return depth, string, True
        index += 1
    return depth, string, False


def _hidden(line: str, magics: List[str], whole_cell: bool = False) -> str:
    indent = "" if whole_cell else line[: len(line) - len(line.lstrip())]
    magics.append(line)
    return indent + _MAGIC_MARK.format(len(magics) - 1)
