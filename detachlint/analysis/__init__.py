"""Shared facts about one file, computed once and queried by every rule."""

from __future__ import annotations

from functools import cached_property
from typing import FrozenSet, Optional

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from detachlint.analysis.cells import CELL_MARK, displayed_lines
from detachlint.analysis.grad_mode import GradMode
from detachlint.analysis.index import FileIndex
from detachlint.analysis.intent import Intent
from detachlint.analysis.modules import ModuleFacts
from detachlint.analysis.names import ImportTable
from detachlint.analysis.positions import positions
from detachlint.analysis.project import NOTHING_ELSEWHERE, WHOLE, CallTargets, Context, Elsewhere, HelperLoop
from detachlint.analysis.values import Holds, ValueFacts


class Facts:
    """Entry point for rules: each fact is built on first use, then kept."""

    def __init__(
        self,
        module: cst.Module,
        path: str = "",
        source: Optional[bytes] = None,
        elsewhere: Optional[Elsewhere] = None,
        project: Optional[Context] = None,
        first_line: int = 1,
    ) -> None:
        self.module = module
        self.path = path
        self.source = source  # the bytes `module` was parsed from, when known
        # The file's line `source` starts on: past 1 for a section of a long
        # file (`engine.lint_source`); every line the facts name is the file's.
        self.first_line = first_line
        # The run this file is linted in, and what its other files say of
        # this one (`analysis/project.py`).
        self.project = project
        self.elsewhere: Elsewhere = elsewhere or (project.elsewhere if project is not None else NOTHING_ELSEWHERE)
        self.index = FileIndex(module)
        self.names = ImportTable(self.index)
        self._shared: dict = {}

    def shared(self, key: str, factory):
        """A fact built once per file by `factory(facts)`, for facts kept in
        their own `analysis/` module (`facts.shared("leaves", LeafFacts)`)."""
        if key not in self._shared:
            self._shared[key] = factory(self)
        return self._shared[key]

    @cached_property
    def call_targets(self) -> Optional[CallTargets]:
        """What the file's calls run in the run's other files (None alone)."""
        if self.project is None:
            return None
        return CallTargets(self, self.project.path, self.project.files)

    def helper_loop_of(self, call: cst.Call) -> Optional[HelperLoop]:
        """The helper loop of another file that `call` runs (`HelperLoop`)."""
        if not self.elsewhere.helper_loops or self.call_targets is None:
            return None
        target = self.call_targets.of(call)
        return self.elsewhere.helper_loops.get(target) if target is not None else None

    def graph_returned_elsewhere(self, call: cst.Call, position: Optional[int] = None) -> bool:
        """Whether `call` runs a function of another file that returns a
        tensor in the graph (at `position` of a returned tuple), with
        autograd on here."""
        wanted = WHOLE if position is None else position
        if self.elsewhere.overrides_return_graph and wanted in self._override_places(call):
            return not self.grad_mode.is_disabled(call)
        if not self.elsewhere.returns_graph or self.call_targets is None:
            return False
        target = self.call_targets.of(call)
        places = self.elsewhere.returns_graph.get(target, ()) if target is not None else ()
        return wanted in places and not self.grad_mode.is_disabled(call)

    def _override_places(self, call: cst.Call) -> tuple:
        """For `self.step(...)` in a class of this file (or a subclass here):
        where overrides of `step` in other files' subclasses return graph."""
        func = call.func
        if not (isinstance(func, cst.Attribute) and self.index.is_receiver(func.value)):
            return ()
        klass = self.index.enclosing(call, cst.ClassDef)
        for owner in self.intent.class_chain(klass):
            places = self.elsewhere.overrides_return_graph.get(f"{owner.name.value}.{func.attr.value}")
            if places:
                return places
        return ()

    @cached_property
    def displayed_lines(self) -> FrozenSet[int]:
        """Lines of a notebook cell's last expression, whose value IPython
        displays (`analysis/cells.py`); empty for a plain file."""
        if self.source is None or CELL_MARK.format("").encode() not in self.source:
            return frozenset()
        shift = self.first_line - 1
        return frozenset(line + shift for line in displayed_lines(self.source.decode("utf-8", "replace")))

    @cached_property
    def grad_mode(self) -> GradMode:
        return GradMode(self.index, self.names, self.elsewhere.calls)

    @cached_property
    def modules(self) -> ModuleFacts:
        return ModuleFacts(self.index, self.names)

    @cached_property
    def intent(self) -> Intent:
        return Intent(self.index, self.names, self.path)

    @cached_property
    def values(self) -> ValueFacts:
        return ValueFacts(self.index, self.names, self.modules, self.grad_mode, self.intent, lambda: self.interpreter)

    @cached_property
    def interpreter(self):
        """What each expression may hold when the file runs (`analysis/interpreter.py`)."""
        from detachlint.analysis.interpreter import Interpreter

        return Interpreter(self.index, self.names, self.modules)

    @cached_property
    def optimizers(self):
        from detachlint.analysis.optimizers import Optimizers

        return Optimizers(self)

    @cached_property
    def positions(self):
        """Source ranges (1-based lines, 0-based columns), built only for
        files that need them: libcst's ranges from regenerating, with
        offsets recorded, only the top-level statements that hold the nodes
        asked for (`analysis/positions.py`)."""
        try:
            return positions(self.module, self.index.parents, self.source, self.first_line)
        except AttributeError:  # a libcst without these internals
            return MetadataWrapper(self.module, unsafe_skip_copy=True).resolve(PositionProvider)

    def line_of(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    @cached_property
    def gradient_paths(self):
        from detachlint.analysis.gradient_paths import GradientPaths

        return GradientPaths(self)


__all__ = ["Facts", "Holds"]
