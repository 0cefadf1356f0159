"""Which modules each optimizer steps, so "meant to train" has a fact behind it.

`self.encoder_opt = torch.optim.Adam(self.encoder.parameters(), lr=lr)`
makes `self.encoder_opt` own `self.encoder`; so do parameter groups
(`[{"params": self.actor.parameters()}, ...]`), `itertools.chain(...)` and
concatenated lists of `.parameters()`. Optimizers stored on `self` belong to
their class and to the classes of the file that inherit from it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, FrozenSet, List, Optional, Tuple

import libcst as cst

from detachlint.analysis.names import dotted

if TYPE_CHECKING:  # pragma: no cover
    from detachlint.analysis import Facts


class Optimizers:
    def __init__(self, facts: "Facts") -> None:
        self.facts = facts
        # (class or None, optimizer text) -> modules it steps
        self._owned: Dict[Tuple[Optional[cst.ClassDef], str], FrozenSet[str]] = {}
        self._stepped: Optional[FrozenSet[str]] = None
        self._synced: Optional[FrozenSet[str]] = None
        for assign in facts.index.nodes(cst.Assign):
            value = assign.value
            if not isinstance(value, cst.Call) or not (facts.names.qualified(value.func) or "").startswith("torch.optim."):
                continue
            modules = self._modules_in(value)
            if not modules:
                continue
            klass = facts.index.enclosing(assign, cst.ClassDef)
            for target in assign.targets:
                text = dotted(target.target)
                if text is not None:
                    key = (klass if text.startswith("self.") else None, text)
                    self._owned[key] = self._owned.get(key, frozenset()) | modules

    def _modules_in(self, call: cst.Call) -> FrozenSet[str]:
        """`X` of every `X.parameters()` in the optimizer's first argument."""
        first = next((arg.value for arg in call.args if arg.keyword is None or arg.keyword.value == "params"), None)
        if first is None:
            return frozenset()
        found = set()
        for inner in [first, *self.facts.index.descendants(first, cst.Call)]:
            if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute):
                if inner.func.attr.value in ("parameters", "named_parameters"):
                    owner = dotted(inner.func.value)
                    if owner is not None:
                        found.add(owner)
        return frozenset(found)

    def stepped_by(self, optimizer: str, at: cst.CSTNode) -> FrozenSet[str]:
        """The modules the optimizer named `optimizer` (as written at `at`) steps."""
        if not optimizer.startswith("self."):
            return self._owned.get((None, optimizer), frozenset())
        for klass in self.facts.intent.class_chain(self.facts.index.enclosing(at, cst.ClassDef)):
            owned = self._owned.get((klass, optimizer))
            if owned:
                return owned
        return frozenset()

    def stepped_modules(self) -> FrozenSet[str]:
        """Modules (as written) some optimizer step of the file updates:
        those its optimizer owns (`opt.step()` with `opt = Adam(net.parameters())`)
        and `net` for an optimizer kept on the module itself (`net.optimizer.step()`)."""
        if self._stepped is None:
            found = set()
            for call in self.facts.index.nodes(cst.Call):
                func = call.func
                if not isinstance(func, cst.Attribute) or func.attr.value != "step":
                    continue
                name = dotted(func.value)
                if name is None:
                    continue
                found |= self.stepped_by(name, call)
                if "." in name:
                    found.add(name.rsplit(".", 1)[0])
            self._stepped = frozenset(found)
        return self._stepped

    def synced_copies(self) -> FrozenSet[str]:
        """Target networks: modules that take another module's weights
        outside `__init__` (`self.q_next.load_state_dict(self.q_eval.state_dict())`,
        run every few steps) and that no optimizer of the file steps. They are
        updated by copying, never by gradients."""
        if self._synced is None:
            found = set()
            index = self.facts.index
            for call in index.nodes(cst.Call):
                func = call.func
                if not isinstance(func, cst.Attribute) or func.attr.value != "load_state_dict" or not call.args:
                    continue
                source = call.args[0].value
                if not (
                    isinstance(source, cst.Call)
                    and isinstance(source.func, cst.Attribute)
                    and source.func.attr.value == "state_dict"
                ):
                    continue
                copy, original = dotted(func.value), dotted(source.func.value)
                function = index.enclosing(call, cst.FunctionDef)
                if copy is None or original is None or copy == original:
                    continue
                if function is None or function.name.value == "__init__":
                    continue  # a one-off copy at set-up, not a periodic sync
                found.add(copy)
            self._synced = frozenset(found) - self.stepped_modules()
        return self._synced

    def steps_in(self, function: cst.FunctionDef) -> List[Tuple[cst.Call, FrozenSet[str]]]:
        """`opt.step()` calls in `function`, each with the modules it steps."""
        found = []
        for call in self.facts.index.descendants(function.body, cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "step" and not call.args:
                name = dotted(func.value)
                if name is not None:
                    owned = self.stepped_by(name, call)
                    if owned:
                        found.append((call, owned))
        return found
