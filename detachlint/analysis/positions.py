"""Source ranges of nodes, from code generation that records offsets.

The ranges are libcst's `PositionProvider` ranges (1-based lines, 0-based
columns, leading and trailing whitespace left out where the syntax allows).
libcst computes a line and a column for every token and every node while it
regenerates the code, which costs as much as parsing the file; here the code
generation records only character offsets, and a node's offsets become a
line and a column when something asks for that node.

A file's findings usually sit in a few of its top-level statements, so only
those are regenerated: Python's own parser (a tenth of libcst's time) says
on which line each top-level statement starts, and a statement regenerated
alone gives its nodes' ranges relative to that line.
"""

from __future__ import annotations

import ast
import bisect
import re
from contextlib import contextmanager
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

import libcst as cst
from libcst._nodes.internal import CodegenState  # the hooks code generation calls on every node
from libcst._position import CodePosition, CodeRange

_NEWLINE = re.compile(r"\r\n?|\n")


class _OffsetState(CodegenState):
    """Code generation that notes where each node starts and ends."""

    def __init__(self, module: cst.Module) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.offset = 0
        self.starts: List[int] = []
        self.spans: Dict[cst.CSTNode, Tuple[int, int]] = {}

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.add_token(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def pop_trailing_newline(self) -> None:
        # Positions count the newline a file without one at its end is given
        # (as libcst's do): the tokens lose it, the offsets keep it.
        pass

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.starts.append(self.offset)

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self.starts.pop()
        if node not in self.spans:  # a syntactic range recorded inside wins
            self.spans[node] = (start, self.offset)

    @contextmanager
    def record_syntactic_position(
        self, node: cst.CSTNode, *, start_node: Optional[cst.CSTNode] = None, end_node: Optional[cst.CSTNode] = None
    ) -> Iterator[None]:
        start = self.offset
        try:
            yield
        finally:
            end = self.offset
            if start_node is not None:
                start = self.spans[start_node][0]
            if end_node is not None:
                end = self.spans[end_node][1]
            self.spans[node] = (start, end)


class Positions(Mapping):
    """node -> CodeRange, converted from offsets on first lookup."""

    def __init__(self, spans: Dict[cst.CSTNode, Tuple[int, int]], code: str, first_line: int = 1) -> None:
        self._spans = spans
        self._line_starts = [0] + [match.end() for match in _NEWLINE.finditer(code)]
        self._first_line = first_line  # the line `code` starts on in the file
        self._ranges: Dict[cst.CSTNode, CodeRange] = {}

    def _position(self, offset: int) -> CodePosition:
        line = bisect.bisect_right(self._line_starts, offset) - 1
        return CodePosition(line + self._first_line, offset - self._line_starts[line])

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        found = self._ranges.get(node)
        if found is None:
            start, end = self._spans[node]
            found = self._ranges[node] = CodeRange(self._position(start), self._position(end))
        return found

    def __contains__(self, node: object) -> bool:
        return node in self._spans

    def __iter__(self):
        return iter(self._spans)

    def __len__(self) -> int:
        return len(self._spans)


def _regenerated(node: cst.CSTNode, module: cst.Module, first_line: int = 1) -> Positions:
    state = _OffsetState(module)
    node._codegen(state)
    return Positions(state.spans, "".join(state.tokens), first_line)


class StatementPositions(Mapping):
    """node -> CodeRange, regenerating only the top-level statement that
    holds the node (the whole module for a node outside every statement)."""

    def __init__(
        self, module: cst.Module, parents: Mapping[cst.CSTNode, cst.CSTNode], code_lines: Sequence[int], start_lines: Sequence[int]
    ) -> None:
        self._module = module
        self._parents = parents
        self._first_lines = dict(zip(module.body, code_lines))
        # Where each top-level statement's code and the statement itself start,
        # known without regenerating anything.
        self.code_lines = list(code_lines)
        self.start_lines = list(start_lines)
        self._by_statement: Dict[cst.CSTNode, Positions] = {}
        self._whole: Optional[Positions] = None

    def _statement(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        parents, module = self._parents, self._module
        while True:
            parent = parents.get(node)
            if parent is None:
                return None
            if parent is module:
                return node if node in self._first_lines else None
            node = parent

    def _ranges(self, node: cst.CSTNode) -> Positions:
        statement = self._statement(node)
        if statement is None:
            if self._whole is None:
                self._whole = _regenerated(self._module, self._module)
            return self._whole
        found = self._by_statement.get(statement)
        if found is None:
            found = self._by_statement[statement] = _regenerated(statement, self._module, self._first_lines[statement])
        return found

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        return self._ranges(node)[node]

    def __contains__(self, node: object) -> bool:
        return node is self._module or node in self._parents or node in self._ranges(node)  # type: ignore[arg-type]

    def __iter__(self):
        return iter(self._ranges(self._module))

    def __len__(self) -> int:
        return len(self._ranges(self._module))


def statement_lines(module: cst.Module, source: bytes) -> Optional[Tuple[List[int], List[int]]]:
    """For each of `module.body`'s statements, the line its code starts on
    (its leading comments and blank lines included) and the line the
    statement itself starts on, as Python's parser places them; None when
    Python cannot parse the file or its statements do not pair up."""
    try:
        statements = ast.parse(source).body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    code_lines: List[int] = []
    start_lines: List[int] = []
    at = 0
    for element in module.body:
        count = len(element.body) if isinstance(element, cst.SimpleStatementLine) else 1
        if at + count > len(statements):
            return None
        parsed = statements[at]
        decorators = getattr(parsed, "decorator_list", [])
        line = decorators[0].lineno if decorators else parsed.lineno
        above = len(element.leading_lines)
        if getattr(element, "decorators", ()):
            above += len(element.decorators[0].leading_lines)
        code_lines.append(line - above)
        start_lines.append(parsed.lineno)  # a definition starts at `def`, after its decorators
        at += count
    return (code_lines, start_lines) if at == len(statements) else None


def positions(
    module: cst.Module, parents: Optional[Mapping[cst.CSTNode, cst.CSTNode]] = None, source: Optional[bytes] = None
) -> Mapping[cst.CSTNode, CodeRange]:
    """The source range of every node of `module`: one top-level statement at
    a time when `parents` and the `source` it was parsed from are given."""
    if parents is not None and source is not None:
        lines = statement_lines(module, source)
        if lines is not None:
            return StatementPositions(module, parents, *lines)
    return _regenerated(module, module)
