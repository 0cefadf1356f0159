"""Source ranges of nodes, from one code generation that records offsets.

The ranges are libcst's `PositionProvider` ranges (1-based lines, 0-based
columns, leading and trailing whitespace left out where the syntax allows).
libcst computes a line and a column for every token and every node while it
regenerates the code, which costs as much as parsing the file; here the code
generation records only character offsets, and a node's offsets become a
line and a column when something asks for that node.
"""

from __future__ import annotations

import bisect
import re
from contextlib import contextmanager
from typing import Dict, Iterator, List, Mapping, Optional, Tuple

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

    def __init__(self, spans: Dict[cst.CSTNode, Tuple[int, int]], code: str) -> None:
        self._spans = spans
        self._line_starts = [0] + [match.end() for match in _NEWLINE.finditer(code)]
        self._ranges: Dict[cst.CSTNode, CodeRange] = {}

    def _position(self, offset: int) -> CodePosition:
        line = bisect.bisect_right(self._line_starts, offset) - 1
        return CodePosition(line + 1, offset - self._line_starts[line])

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


def positions(module: cst.Module) -> Positions:
    """The source range of every node of `module`."""
    state = _OffsetState(module)
    module._codegen(state)
    return Positions(state.spans, "".join(state.tokens))
