"""Facts that cross the project's modules: who calls a file's functions, and how.

A file is analysed alone, but its functions may run only from other files:
`evaluate(model, loader)` in `utils.py`, called from `train.py` inside
`with torch.no_grad():`, runs with autograd off though nothing in
`utils.py` says so. Each linted file leaves a `Summary` beside its
findings: the calls it makes into other files of the same run (which
file, which function, the grad mode at the call, whether an `if` decides
it), which of its own functions its own calls reach only with autograd
off, and which members of other files' classes its optimizers step.
`incoming` turns the summaries into what each file did not see
(`Elsewhere`): callers (`ExternalCall`), which `GradMode` joins with the
file's own call sites, and stepped members, which `Optimizers` joins with
the file's own optimizers.

A module name is resolved the way Python would find it from the calling
file: relative imports from the caller's package, absolute ones from the
folder above the caller's top package and from the caller's own folder (a
script's `sys.path[0]`), to a `.py` file or a package's `__init__.py`
among the files of the run. Calls of top-level functions are followed
(`fit(...)`, `engine.fit(...)`), and of methods on an object every binding
of which builds one class of another file (`trainer = Trainer(cfg)`, then
`trainer.evaluate()`; `self.agent = Agent()`, then `self.agent.act(obs)`).
"""

from __future__ import annotations

import ast
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Dict, FrozenSet, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple

import libcst as cst

from detachlint.analysis.names import constructors, dotted
from detachlint.analysis.optimizers import ALL, UNKNOWN_PART, owner_part
from detachlint.analysis.values import branched

if TYPE_CHECKING:
    from detachlint.analysis import Facts

# Grad modes a caller can leave its callee in, as summaries spell them.
OFF = ("disabled", "maybe-disabled")
# A returned value itself, not a place in a returned tuple.
WHOLE = -1


@dataclass(frozen=True)
class ExternalCall:
    """A call of one of a file's functions, made in another file of the run."""

    path: str  # the calling file, as the run displays it
    line: int  # 0 for a call with autograd on: no message names it
    mode: Optional[str]  # Mode.value at the call, None when nothing sets one
    branched: bool  # an `if`/`try` of the calling function decides whether it runs

    @property
    def disabled(self) -> bool:
        return self.mode in OFF

    def to_json(self) -> list:
        return [self.path, self.line, self.mode, self.branched]

    @classmethod
    def from_json(cls, data: Sequence) -> "ExternalCall":
        return cls(str(data[0]), int(data[1]), data[2], bool(data[3]))


@dataclass(frozen=True)
class HelperLoop:
    """A function whose loop runs the model it is handed, asking for no
    gradient (`ModelCalls.evaluating_parameter`): called after
    `model.eval()` from another file, it evaluates with autograd on."""

    path: str  # its file, as the run displays it
    line: int  # the loop's line
    parameter: str  # the model's parameter
    position: int  # its place among the parameters a call passes by position, -1 for none

    def to_json(self) -> list:
        return [self.path, self.line, self.parameter, self.position]

    @classmethod
    def from_json(cls, data: Sequence) -> "HelperLoop":
        return cls(str(data[0]), int(data[1]), str(data[2]), int(data[3]))

    def argument(self, call: cst.Call) -> Optional[cst.BaseExpression]:
        """What `call` passes for the model."""
        for position, arg in enumerate(call.args):
            if arg.star:
                return None
            if arg.keyword is not None and arg.keyword.value == self.parameter or arg.keyword is None and position == self.position:
                return arg.value
        return None


@dataclass
class Summary:
    """What one file tells the others."""

    # (callee file's absolute path, function name, the call as an ExternalCall)
    calls: List[Tuple[str, str, ExternalCall]] = field(default_factory=list)
    # Its top-level functions whose calls in the file all run with autograd off.
    off_in_file: List[str] = field(default_factory=list)
    # Its top-level functions and methods: what other files' calls can reach.
    functions: List[str] = field(default_factory=list)
    # (file, class, member) its optimizers step of instances of other files'
    # classes: `head` for `SGD(model.head.parameters())`, ALL for a whole
    # instance, UNKNOWN_PART for each class it builds when some optimizer's
    # parameters cannot be read.
    stepped: List[Tuple[str, str, str]] = field(default_factory=list)
    # Its functions whose loop runs a model they are handed, for no gradient.
    helper_loops: Dict[str, HelperLoop] = field(default_factory=dict)
    # Whether it switches any model to eval or train mode: only then can a
    # helper loop of another file evaluate on its calls.
    switches: bool = False
    # Its functions that return a tensor in the graph: at these places of a
    # returned tuple, WHOLE for the value itself (`return loss`).
    returns_graph: Dict[str, List[int]] = field(default_factory=dict)
    # Its top-level classes -> the (file, class) of other files they derive
    # from: what their methods override (`class Sub(engine.Trainer)`).
    bases: Dict[str, List[Tuple[str, str]]] = field(default_factory=dict)

    @classmethod
    def joined(cls, parts: "List[Summary]") -> "Summary":
        """A long file's summary from those of its sections (each defines
        its own functions and classes)."""
        whole = cls()
        for part in parts:
            whole.calls.extend(part.calls)
            whole.off_in_file.extend(part.off_in_file)
            whole.functions.extend(part.functions)
            whole.stepped.extend(s for s in part.stepped if s not in whole.stepped)
            whole.helper_loops.update(part.helper_loops)
            whole.switches = whole.switches or part.switches
            whole.returns_graph.update(part.returns_graph)
            whole.bases.update(part.bases)
        return whole

    def to_json(self) -> dict:
        calls = [[p, n, c.to_json()] for p, n, c in self.calls]
        stepped = [list(s) for s in self.stepped]
        helper_loops = [[n, h.to_json()] for n, h in sorted(self.helper_loops.items())]
        return {
            "calls": calls,
            "off_in_file": list(self.off_in_file),
            "functions": list(self.functions),
            "stepped": stepped,
            "helper_loops": helper_loops,
            "switches": self.switches,
            "returns_graph": [[n, list(p)] for n, p in sorted(self.returns_graph.items())],
            "bases": [[n, [list(b) for b in found]] for n, found in sorted(self.bases.items())],
        }

    @classmethod
    def from_json(cls, data: dict) -> "Summary":
        calls = [(str(p), str(n), ExternalCall.from_json(c)) for p, n, c in data["calls"]]
        stepped = [(str(p), str(k), str(m)) for p, k, m in data["stepped"]]
        helper_loops = {str(n): HelperLoop.from_json(h) for n, h in data["helper_loops"]}
        return cls(
            calls, [str(n) for n in data["off_in_file"]], [str(n) for n in data["functions"]], stepped,
            helper_loops, bool(data["switches"]), {str(n): [int(i) for i in p] for n, p in data["returns_graph"]},
            {str(n): [(str(f), str(k)) for f, k in found] for n, found in data.get("bases", [])},
        )


@dataclass(frozen=True)
class Elsewhere:
    """What the run's other files say of one file, as far as it can change
    the file's analysis."""

    # Function (`fit`, `Trainer.evaluate`) -> its calls from other files.
    calls: Mapping[str, Tuple[ExternalCall, ...]] = field(default_factory=dict)
    # Class -> the only members other files' optimizers step of its instances.
    stepped: Mapping[str, FrozenSet[str]] = field(default_factory=dict)
    # (file, function) of another file that the file calls -> its helper
    # loop, for a file that switches models to eval mode.
    helper_loops: Mapping[Tuple[str, str], HelperLoop] = field(default_factory=dict)
    # (file, function) of another file that the file calls -> where what it
    # returns is in the graph (`Summary.returns_graph`).
    returns_graph: Mapping[Tuple[str, str], Tuple[int, ...]] = field(default_factory=dict)
    # Method of a class of the file (`Trainer.step`) -> where what an
    # override in another file's subclass returns is in the graph: a
    # template method's `self.step(...)` runs the override.
    overrides_return_graph: Mapping[str, Tuple[int, ...]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.calls or self.stepped or self.helper_loops or self.returns_graph or self.overrides_return_graph)

    def to_json(self) -> list:
        calls = [[name, [c.to_json() for c in found]] for name, found in sorted(self.calls.items())]
        helper_loops = [[list(target), h.to_json()] for target, h in sorted(self.helper_loops.items())]
        returns = [[list(target), list(places)] for target, places in sorted(self.returns_graph.items())]
        overrides = [[name, list(places)] for name, places in sorted(self.overrides_return_graph.items())]
        stepped = [[name, sorted(members)] for name, members in sorted(self.stepped.items())]
        return [calls, stepped, helper_loops, returns, overrides]


NOTHING_ELSEWHERE = Elsewhere()


@dataclass(frozen=True)
class Context:
    """What a file is linted with inside a run of several files."""

    files: ProjectFiles
    path: Path  # the file itself, to resolve its imports
    elsewhere: Elsewhere = NOTHING_ELSEWHERE


def file_key(path: Path) -> str:
    return os.path.normcase(os.path.abspath(path))


class ProjectFiles:
    """The Python files of one run, found by the module names that import them."""

    def __init__(self, paths: Iterable[Path]) -> None:
        self.files = frozenset(file_key(p) for p in paths if str(p).endswith(".py"))
        # Every call of a file asks: answers by (folder, base, name), roots by folder.
        self._found: Dict[Tuple[str, Optional[str], str], Optional[Tuple[str, str]]] = {}
        self._roots: Dict[str, str] = {}

    def __getstate__(self) -> dict:
        return {"files": self.files}  # what a worker process needs; it learns the rest

    def __setstate__(self, state: dict) -> None:
        self.__init__(())
        self.files = state["files"]

    def __bool__(self) -> bool:
        return len(self.files) > 1

    def _module_file(self, base: str, parts: Sequence[str]) -> Optional[str]:
        stem = os.path.join(base, *parts)
        for candidate in (stem + ".py", os.path.join(stem, "__init__.py")):
            key = os.path.normcase(candidate)
            if key in self.files:
                return key
        return None

    def function(self, caller: str, base: Optional[str], name: str) -> Optional[Tuple[str, str]]:
        """(file, function) that `name` (`engine.fit`) names in the file
        `caller`: `base` is the folder a relative import starts from, None
        for an absolute name."""
        folder = os.path.dirname(caller)
        key = (folder, base, name)
        if key not in self._found:
            self._found[key] = self._function(folder, base, name)
        found = self._found[key]
        return found if found is not None and found[0] != caller else None

    def _function(self, folder: str, base: Optional[str], name: str) -> Optional[Tuple[str, str]]:
        module, _, function = name.rpartition(".")
        if not module and base is None:
            return None
        parts = module.split(".") if module else []
        if base is not None:
            bases = [base]
        else:
            if folder not in self._roots:
                self._roots[folder] = _package_root(folder)
            bases = [self._roots[folder], folder]
        for start in dict.fromkeys(bases):
            found = self._module_file(start, parts)
            if found is not None:
                return found, function
        return None


def _package_root(folder: str) -> str:
    """The folder above the top package holding `folder` (`folder` itself
    outside any package)."""
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return folder


def _relative_imports(facts: "Facts", caller: str) -> Dict[str, Tuple[str, str]]:
    """Local name -> (base folder, dotted name) for `from .engine import fit`
    and `from . import engine`."""
    found: Dict[str, Tuple[str, str]] = {}
    for node in facts.index.nodes(cst.ImportFrom):
        if not node.relative or isinstance(node.names, cst.ImportStar):
            continue
        base = os.path.dirname(caller)
        for _ in range(len(node.relative) - 1):
            base = os.path.dirname(base)
        module = dotted(node.module) if node.module is not None else ""
        for alias in node.names:
            name = dotted(alias.name) or ""
            local = alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else name
            found[local] = (base, f"{module}.{name}" if module else name)
    return found


class CallTargets:
    """The functions and methods of the run's other files that a file's
    calls run."""

    def __init__(self, facts: "Facts", caller_path: Path, project: ProjectFiles) -> None:
        self.facts, self.project = facts, project
        self.caller = file_key(caller_path)
        self.relative = _relative_imports(facts, self.caller)
        self._classes: Dict[Tuple[cst.CSTNode, str], Optional[Tuple[str, str]]] = {}

    def resolve(self, expr: cst.BaseExpression) -> Optional[Tuple[str, str]]:
        """(file, name) of a function or class `expr` names in another file."""
        name = dotted(expr)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        if head in self.relative:
            base, module = self.relative[head]
            return self.project.function(self.caller, base, f"{module}.{rest}" if rest else module)
        qualified = self.facts.names.qualified(expr)
        if qualified is None or (not rest and self.facts.grad_mode.rebound_at(expr, head)):
            return None
        return self.project.function(self.caller, None, qualified)

    def of(self, call: cst.Call) -> Optional[Tuple[str, str]]:
        """(file, `fit` or `Trainer.evaluate`) that `call` runs."""
        func = call.func
        target = self.resolve(func)
        if target is None and isinstance(func, cst.Attribute) and self.facts.names.qualified(func.value) is None:
            # `trainer.evaluate()` with `trainer = Trainer(...)` of another file.
            built = self._class_of(func.value)
            if built is not None:
                target = (built[0], f"{built[1]}.{func.attr.value}")
        return target

    def _class_of(self, receiver: cst.BaseExpression) -> Optional[Tuple[str, str]]:
        """(file, class) of another file that builds every `receiver`."""
        text = dotted(receiver)
        if text is None or not (isinstance(receiver, cst.Name) or text.count(".") == 1 and self.facts.index.is_receiver(receiver.value)):
            return None
        index = self.facts.index
        scope = index.scope_of(receiver) if isinstance(receiver, cst.Name) else index.enclosing(receiver, cst.ClassDef)
        key = (scope, text)
        if key not in self._classes:
            built = {self.resolve(ctor.func) for ctor in constructors(receiver, index) or ()}
            self._classes[key] = next(iter(built)) if len(built) == 1 else None
        return self._classes[key]


def summarize(facts: "Facts", caller_path: Path, project: ProjectFiles) -> Summary:
    """The calls `facts`' file makes into other files of `project`, with the
    grad mode at each, its own functions called only with autograd off, and
    its helper loops."""
    from detachlint.analysis.model_calls import ModelCalls

    targets = facts.call_targets if facts.project is not None else CallTargets(facts, caller_path, project)
    summary = Summary()
    index, grad_mode = facts.index, facts.grad_mode
    lines = _CallLines(facts)
    for call in index.nodes(cst.Call):
        target = targets.of(call)
        if target is None:
            continue
        mode = grad_mode.mode_at(call)
        function = index.enclosing(call, cst.FunctionDef)
        # Only a call with autograd off is ever named in a message: the
        # others go without a line, which would cost regenerating the code.
        line = lines.of(call) if mode is not None and mode.value in OFF else 0
        # Script code runs once, as written: a call under `if __name__ == "__main__":` is the script's.
        decided = function is not None and branched(call, function, index)
        where = ExternalCall(str(facts.path), line, mode.value if mode is not None else None, decided)
        summary.calls.append((target[0], target[1], where))
    summary.stepped = _stepped_elsewhere(facts, targets.resolve)
    model_calls = facts.shared("model_calls", ModelCalls)
    for function, name in exported(index.module):
        summary.functions.append(name)
        if grad_mode.called_here_only_when_disabled(function):
            summary.off_in_file.append(name)
        found = model_calls.evaluating_parameter(function)
        if found is not None:
            loop, parameter, position = found
            summary.helper_loops[name] = HelperLoop(str(facts.path), facts.line_of(loop), parameter, position)
        places = _graph_returned(facts, function)
        if places:
            summary.returns_graph[name] = places
    summary.switches = facts.intent.switches_anywhere
    for statement in index.module.body:
        if isinstance(statement, cst.ClassDef):
            found = [targets.resolve(base.value) for base in statement.bases if base.keyword is None]
            if any(found):
                summary.bases[statement.name.value] = sorted({b for b in found if b is not None})
    return summary


def _graph_returned(facts: "Facts", function: cst.FunctionDef) -> List[int]:
    """Where what a function that asks for gradients returns is a tensor in
    the graph whatever its callers pass (`return loss, acc` after
    `loss.backward()`): WHOLE, or places in a returned tuple. Only such
    steps are summarized: a loss returned to be backpropagated by the caller
    is proven in the graph there, by its own `backward()`; and following
    every return of every function would cost more than the rest of the
    analysis."""
    from detachlint.analysis.loops import LoopFacts

    index = facts.index
    if function not in facts.intent.functions_computing_gradients or facts.grad_mode.mode_at(function.body) is not None:
        return []
    returns = [r for r in index.descendants(function.body, cst.Return) if r.value is not None and index.scope_of(r) is function]
    if not returns:
        return []
    loops = facts.shared("loops", LoopFacts)
    places = set()
    for returned in returns:
        value = returned.value
        if isinstance(value, cst.Tuple):
            places.update(i for i, e in enumerate(value.elements) if loops.carries_graph_from_callers(e.value))
        elif loops.carries_graph_from_callers(value):
            places.add(WHOLE)
    return sorted(places)


def _stepped_elsewhere(facts: "Facts", resolve) -> List[Tuple[str, str, str]]:
    """What the file's optimizers step of instances of other files' classes
    (`Summary.stepped`)."""
    owners = facts.optimizers.parameter_owners()
    found: List[Tuple[str, str, str]] = []
    unknown = owners is None
    for owner in owners or ():
        root, member = owner_part(owner)
        if root is None:
            unknown = True
            continue
        if facts.index.is_receiver(root) or facts.values.class_passed(root) is not None:
            continue  # a class of this file
        built = {resolve(ctor.func) for ctor in constructors(root, facts.index) or ()}
        if len(built) != 1 or None in built:
            unknown = True
            continue
        (path, klass), = built
        found.append((path, klass, member))
    if unknown:
        # Anything built here may be what an unread optimizer steps.
        for call in facts.index.nodes(cst.Call):
            target = resolve(call.func)
            if target is not None:
                found.append((target[0], target[1], UNKNOWN_PART))
    return sorted(set(found))


class _CallLines:
    """Lines of a file's calls from Python's own parse, which gives them
    without regenerating code: the calls of both trees, in source order,
    are the same calls. Built on first use; libcst's positions answer when
    the two lists disagree."""

    def __init__(self, facts: "Facts") -> None:
        self.facts = facts
        self._lines: Optional[Dict[cst.Call, Tuple[int, Optional[str]]]] = None

    def of(self, call: cst.Call) -> int:
        if self._lines is None:
            self._lines = self._match()
        found = self._lines.get(call)
        if found is not None and found[1] == dotted(call.func):
            return found[0]
        return self.facts.line_of(call)

    def _match(self) -> Dict[cst.Call, Tuple[int, Optional[str]]]:
        try:
            tree = ast.parse(self.facts.source) if self.facts.source is not None else None
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = None
        if tree is None:
            return {}
        calls = sorted(
            (n for n in ast.walk(tree) if isinstance(n, ast.Call)),
            key=lambda n: (n.lineno, n.col_offset, -(n.end_lineno or 0), -(n.end_col_offset or 0)),
        )
        ours = self.facts.index.nodes(cst.Call)
        if len(calls) != len(ours):
            return {}
        shift = self.facts.first_line - 1
        return {call: (theirs.lineno + shift, _dotted_ast(theirs.func)) for call, theirs in zip(ours, calls)}


def _dotted_ast(expr: ast.expr) -> Optional[str]:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        inner = _dotted_ast(expr.value)
        return f"{inner}.{expr.attr}" if inner is not None else None
    return None


def exported(module: cst.Module) -> Iterator[Tuple[cst.FunctionDef, str]]:
    """The functions other files can call, with the names their calls are
    summarized under: `fit`, and `Trainer.evaluate` for a method of a
    top-level class."""
    for statement in module.body:
        if isinstance(statement, cst.FunctionDef):
            yield statement, statement.name.value
        elif isinstance(statement, cst.ClassDef) and isinstance(statement.body, cst.IndentedBlock):
            for member in statement.body.body:
                if isinstance(member, cst.FunctionDef):
                    yield member, f"{statement.name.value}.{member.name.value}"


def incoming(summaries: Mapping[str, Summary]) -> Dict[str, Elsewhere]:
    """For each file, what the other files say of it, as far as it can change
    the file's analysis: calls of a function some file makes with autograd
    off, or of one every call of its own file runs with autograd off; the
    members of a class the optimizers of other files step, when they step
    only some; the functions of other files it calls with autograd on that
    return tensors in the graph; and for a file that switches models to
    eval mode, the helper loops of other files it calls. Sorted, so equal facts give equal cache keys."""
    calls: Dict[str, Dict[str, List[ExternalCall]]] = {}
    stepped: Dict[str, Dict[str, set]] = {}
    helper_loops: Dict[str, Dict[Tuple[str, str], HelperLoop]] = {}
    returns: Dict[str, Dict[Tuple[str, str], Tuple[int, ...]]] = {}
    overrides: Dict[str, Dict[str, set]] = {}
    for caller, summary in summaries.items():
        for name, places in summary.returns_graph.items():
            klass, _, method = name.rpartition(".")
            for base_file, base in summary.bases.get(klass, ()) if klass else ():
                overrides.setdefault(base_file, {}).setdefault(f"{base}.{method}", set()).update(places)
        for callee, function, call in summary.calls:
            calls.setdefault(callee, {}).setdefault(function, []).append(call)
            own = summaries.get(callee)
            if own is None:
                continue
            found = own.helper_loops.get(function) if summary.switches else None
            if found is not None:
                helper_loops.setdefault(caller, {})[(callee, function)] = found
            if function in own.returns_graph and not call.disabled:
                returns.setdefault(caller, {})[(callee, function)] = tuple(own.returns_graph[function])
        for callee, klass, member in summary.stepped:
            stepped.setdefault(callee, {}).setdefault(klass, set()).add(member)
    result: Dict[str, Elsewhere] = {}
    for callee in sorted(set(calls) | set(stepped) | set(helper_loops) | set(returns) | set(overrides)):
        own = summaries.get(callee)
        kept: Dict[str, Tuple[ExternalCall, ...]] = {}
        for function, found in sorted(calls.get(callee, {}).items()):
            if own is not None and function not in own.functions:
                continue  # a class, a constant: no function of the file
            # A file without a summary never says torch: it is linted only
            # when called with autograd off, as a link of a chain.
            if any(c.disabled for c in found) or (own is not None and function in own.off_in_file):
                kept[function] = tuple(sorted(set(found), key=lambda c: (c.path, c.line, c.mode or "", c.branched)))
        parts = {
            klass: frozenset(members)
            for klass, members in sorted(stepped.get(callee, {}).items())
            if own is not None and ALL not in members and UNKNOWN_PART not in members
        }
        loops = dict(sorted(helper_loops.get(callee, {}).items()))
        graph = dict(sorted(returns.get(callee, {}).items()))
        overridden = {name: tuple(sorted(places)) for name, places in sorted(overrides.get(callee, {}).items())}
        if kept or parts or loops or graph or overridden:
            result[callee] = Elsewhere(kept, parts, loops, graph, overridden)
    return result
