"""Source ranges of nodes, from code generation that records offsets.

The ranges are libcst's `PositionProvider` ranges (1-based lines, 0-based
columns, leading and trailing whitespace left out where the syntax allows).
libcst computes a line and a column for every token and every node while it
regenerates the code, which costs as much as parsing the file; here the code
generation records only character offsets, and a node's offsets become a
line and a column when something asks for that node.

A file's findings usually sit in a few of its statements, so only those
are regenerated: Python's own parser (a tenth of libcst's time) says on
which line each top-level statement, and each statement of a class or
function body, starts, and a statement regenerated alone (at its
indentation) gives its nodes' ranges relative to that line.
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

# A line ends as Python ends it: a form feed or a vertical tab ends none.
LINE_BREAK = re.compile(r"\r\n?|\n")


class _OffsetState(CodegenState):
    """Code generation that notes where each node starts and ends."""

    def __init__(self, module: cst.Module, indents: Sequence[str] = ()) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline, indent_tokens=list(indents))
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
        self._line_starts = [0] + [match.end() for match in LINE_BREAK.finditer(code)]
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


def _regenerated(node: cst.CSTNode, module: cst.Module, first_line: int = 1, indents: Sequence[str] = ()) -> Positions:
    state = _OffsetState(module, indents)
    node._codegen(state)
    return Positions(state.spans, "".join(state.tokens), first_line)


class StatementPositions(Mapping):
    """node -> CodeRange, regenerating only the statement that holds the
    node: a top-level statement, or inside a class or function (at any
    depth of definitions) one statement of its body, at its indentation;
    the whole module for a node outside every statement."""

    def __init__(self, module: cst.Module, parents: Mapping[cst.CSTNode, cst.CSTNode], top: "_Placed", first_line: int = 1) -> None:
        self._module = module
        self._first_line = first_line
        self._parents = parents
        # Where each top-level statement's code and the statement itself start,
        # known without regenerating anything.
        self.code_lines = [line for line, _, _ in top]
        self.start_lines = [line for _, line, _ in top]
        # statement -> (line its code starts on, indentation around it, Python's node)
        self._units: Dict[cst.CSTNode, Tuple[int, Tuple[str, ...], ast.stmt]] = {
            element: (line, (), parsed) for element, (line, _, parsed) in zip(module.body, top)
        }
        self._opened: set = set()
        self._by_statement: Dict[cst.CSTNode, Positions] = {}
        self._whole: Optional[Positions] = None

    def _open(self, definition: cst.CSTNode) -> None:
        """Place the statements of a class or function body, once."""
        if definition in self._opened:
            return
        self._opened.add(definition)
        block = definition.body
        if not isinstance(block, cst.IndentedBlock):
            return
        _, indents, parsed = self._units[definition]
        placed = _placed(block.body, parsed.body)
        if placed is None:
            return
        inner = (*indents, self._module.default_indent if block.indent is None else block.indent)
        for element, (line, _, node) in zip(block.body, placed):
            self._units[element] = (line, inner, node)

    def _statement(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        path = [node]
        parents, module = self._parents, self._module
        while True:
            parent = parents.get(path[-1])
            if parent is None:
                return None
            if parent is module:
                break
            path.append(parent)
        unit = path[-1]
        if unit not in self._units:
            return None
        for inner in reversed(path):
            if inner in self._units:
                unit = inner
                if isinstance(inner, (cst.ClassDef, cst.FunctionDef)):
                    self._open(inner)
        return unit

    def _ranges(self, node: cst.CSTNode) -> Positions:
        statement = self._statement(node)
        if statement is None:
            if self._whole is None:
                self._whole = _regenerated(self._module, self._module, self._first_line)
            return self._whole
        found = self._by_statement.get(statement)
        if found is None:
            line, indents, _ = self._units[statement]
            found = self._by_statement[statement] = _regenerated(statement, self._module, line, indents)
        return found

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        return self._ranges(node)[node]

    def __contains__(self, node: object) -> bool:
        return node is self._module or node in self._parents or node in self._ranges(node)  # type: ignore[arg-type]

    def __iter__(self):
        return iter(self._ranges(self._module))

    def __len__(self) -> int:
        return len(self._ranges(self._module))


# (line the statement's code starts on, line the statement starts on, Python's node), per statement
_Placed = List[Tuple[int, int, ast.stmt]]


def _placed(elements: Sequence[cst.CSTNode], statements: Sequence[ast.stmt]) -> Optional[_Placed]:
    """Lines of each of libcst's `elements`, from Python's `statements` of
    the same body (a line of `a; b` is two of them); None when they do not
    pair up."""
    placed: _Placed = []
    at = 0
    for element in elements:
        count = len(element.body) if isinstance(element, cst.SimpleStatementLine) else 1
        if at + count > len(statements):
            return None
        parsed = statements[at]
        decorators = getattr(parsed, "decorator_list", [])
        line = decorators[0].lineno if decorators else parsed.lineno
        above = len(element.leading_lines)
        if getattr(element, "decorators", ()):
            above += len(element.decorators[0].leading_lines)
        placed.append((line - above, parsed.lineno, parsed))  # a definition starts at `def`, after its decorators
        at += count
    return placed if at == len(statements) else None


def statement_lines(module: cst.Module, source: bytes, first_line: int = 1) -> Optional[_Placed]:
    """For each of `module.body`'s statements, the line its code starts on
    (its leading comments and blank lines included), the line the statement
    itself starts on, as Python's parser places them, and Python's node;
    None when Python cannot parse the file or its statements do not pair up.
    `source` starts on the file's line `first_line` (a section of a long file)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    if first_line != 1:
        ast.increment_lineno(tree, first_line - 1)
    return _placed(module.body, tree.body)


def positions(
    module: cst.Module,
    parents: Optional[Mapping[cst.CSTNode, cst.CSTNode]] = None,
    source: Optional[bytes] = None,
    first_line: int = 1,
) -> Mapping[cst.CSTNode, CodeRange]:
    """The source range of every node of `module`: one top-level statement at
    a time when `parents` and the `source` it was parsed from are given.
    The module's code starts on the file's line `first_line`."""
    if parents is not None and source is not None:
        placed = statement_lines(module, source, first_line)
        if placed is not None:
            return StatementPositions(module, parents, placed, first_line)
    return _regenerated(module, module, first_line)
