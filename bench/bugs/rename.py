"""Rename every identifier a case's author chose to a neutral one (`n1`, `n2`, ...):
`python bench/bugs/rename.py SRC_ROOT OUT_ROOT` writes renamed copies of every case.

What is renamed, everywhere in the file and consistently (one old name, one
new name): classes, functions, methods, parameters (`self` too), locals,
globals, comprehension and lambda variables, and the attributes the file
defines (assigned through an attribute, or bound in a class body), with the
keyword arguments of calls that may reach the file's own functions.

What is kept: every name an import binds, Python's builtins and keywords,
dunders, and every attribute or method name that belongs to an API
(torch, torch.nn modules and their parameters, optimizers, autograd
Functions, numpy, Python's own types and common standard-library objects,
framework hooks such as `forward` or `training_step`; the list is
`api_names.txt` beside this file, written by `--api-names`). An attribute
name the file defines that is also an API name (`self.weight`, a method
`step`) keeps its name, since `.step` on an optimizer and on the file's own
object cannot be told apart without types. Layout and line numbers are kept.

A renamed file may not run as the original does (a `**kwargs` dict with
string keys, `getattr(obj, "name")`); the benchmark's evidence test lists
those cases (`renamed_unfaithful.txt`) rather than dropping them.
"""

from __future__ import annotations

import argparse
import builtins
import keyword
import re
import shutil
import sys
from pathlib import Path
from typing import Dict, Iterable, Set, Tuple

import libcst as cst

# A string that could name something (`"fc"`, `"conv1.weight"`, `"--learning_rate"`,
# `"conv1b."`), and the fields of a format string (`"{loss.val:.4f}"`).
_NAMING_STRING = re.compile(r"^[-\w.]+$")
_FORMAT_FIELD = re.compile(r"\{([A-Za-z_][\w.]*)")
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")

HERE = Path(__file__).resolve().parent
API_NAMES = HERE / "api_names.txt"

# Methods a framework calls by name on the user's subclasses (Lightning, gym).
FRAMEWORK_HOOKS = """
training_step validation_step test_step predict_step configure_optimizers
training_epoch_end validation_epoch_end test_epoch_end on_train_start on_train_end
on_train_epoch_start on_train_epoch_end on_validation_epoch_start on_validation_epoch_end
on_before_backward on_after_backward on_before_optimizer_step optimizer_step
on_fit_start on_fit_end setup teardown prepare_data train_dataloader val_dataloader
test_dataloader predict_dataloader backward manual_backward log log_dict
reset step render close seed action_space observation_space
""".split()


def api_names() -> Set[str]:
    names = set(FRAMEWORK_HOOKS)
    if API_NAMES.exists():
        names.update(API_NAMES.read_text(encoding="utf-8").split())
    return names


def write_api_names() -> int:
    """Collect the attribute names of the APIs the cases use (needs torch and numpy)."""
    import argparse as _argparse
    import collections
    import copy
    import functools
    import inspect
    import itertools
    import math
    import random

    import numpy
    import torch
    from torch import nn

    names: Set[str] = set()

    def add(obj) -> None:
        names.update(n for n in dir(obj) if n.isidentifier())

    for obj in (torch, torch.Tensor, nn, nn.functional, nn.init, nn.utils, torch.optim, torch.optim.lr_scheduler,
                torch.autograd, torch.autograd.Function, torch.autograd.graph, torch.utils.data,
                torch.utils.data.Dataset, torch.utils.data.DataLoader, torch.distributions, torch.linalg, torch.fft,
                torch.cuda, torch.backends, numpy, numpy.ndarray, numpy.random, numpy.linalg, math, random,
                collections, collections.deque, collections.OrderedDict, collections.defaultdict, itertools,
                functools, copy, _argparse.ArgumentParser, _argparse.Namespace,
                list, dict, set, frozenset, tuple, str, bytes, int, float, complex, bool, object, type,
                Exception, slice, range):
        add(obj)
    for owner in (nn, torch.optim, torch.optim.lr_scheduler, torch.distributions):
        for _, cls in inspect.getmembers(owner, inspect.isclass):
            add(cls)
            names.update(getattr(cls, "__constants__", ()) or ())
            try:
                names.update(inspect.signature(cls.__init__).parameters)
            except (TypeError, ValueError):
                pass
    # Parameters, buffers and attributes that modules set in their constructors.
    samples = [nn.Linear(2, 2), nn.Conv1d(1, 1, 1), nn.Conv2d(1, 1, 1), nn.ConvTranspose2d(1, 1, 1),
               nn.BatchNorm1d(2), nn.BatchNorm2d(2), nn.LayerNorm(2), nn.GroupNorm(1, 2), nn.Embedding(2, 2),
               nn.LSTM(2, 2), nn.GRU(2, 2), nn.RNN(2, 2), nn.LSTMCell(2, 2), nn.GRUCell(2, 2),
               nn.MultiheadAttention(2, 1), nn.TransformerEncoderLayer(2, 1), nn.Dropout(), nn.PReLU()]
    for module in samples:
        names.update(vars(module))
        names.update(name.split(".")[-1] for name, _ in module.named_parameters())
        names.update(name.split(".")[-1] for name, _ in module.named_buffers())
    optimizer = torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=0.1)
    names.update(vars(optimizer))
    names.update(optimizer.param_groups[0])
    names = {n for n in names if n.isidentifier() and not (n.startswith("__") and n.endswith("__"))}
    API_NAMES.write_text("\n".join(sorted(names)) + "\n", encoding="utf-8")
    print(f"{len(names)} API names written to {API_NAMES}")
    return 0


class _Bindings(cst.CSTVisitor):
    """The names the file binds, split by how they are bound."""

    def __init__(self) -> None:
        self.imported: Set[str] = set()
        self.bound: Set[str] = set()  # names bound outside class bodies
        self.attributes: Set[str] = set()  # attribute targets and class-body bindings
        self.functions: Set[str] = set()  # defs and classes: calls to these may pass keywords
        self.seen: Set[str] = set()  # every identifier, so new names never collide
        self.in_strings: Set[str] = set()  # spelt in strings, or keywords of imports' callables
        self._classes = 0
        self._functions_in_class: list = []

    def _in_class_body(self) -> bool:
        return bool(self._functions_in_class) and self._functions_in_class[-1] == 0

    def _bind(self, name: str) -> None:
        (self.attributes if self._in_class_body() else self.bound).add(name)

    def visit_Name(self, node: cst.Name) -> None:
        self.seen.add(node.value)

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        # `getattr(m, "fc")`, `state["conv1.weight"]`, `{"lr": ...}`, argparse's
        # `"--lr"`: a name spelt in a string keeps it, or the file would not run.
        try:
            text = node.evaluated_value
        except Exception:
            return
        if not isinstance(text, str):
            return
        if _NAMING_STRING.match(text):
            self.in_strings.update(_IDENTIFIER.findall(text))
        for field in _FORMAT_FIELD.findall(text):
            self.in_strings.update(_IDENTIFIER.findall(field))

    def visit_Call(self, node: cst.Call) -> None:
        # `SimpleNamespace(lr=...)`, `argparse.Namespace(epochs=...)`: a keyword
        # an import's callable receives may come back as an attribute.
        root = node.func
        while isinstance(root, cst.Attribute):
            root = root.value
        if isinstance(root, cst.Name) and (root.value in self.imported or hasattr(builtins, root.value)):
            self.in_strings.update(arg.keyword.value for arg in node.args if arg.keyword is not None)

    def visit_Import(self, node: cst.Import) -> bool:
        for alias in node.names:
            bound = alias.asname.name if alias.asname else alias.name
            while isinstance(bound, cst.Attribute):
                bound = bound.value
            self.imported.add(bound.value)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                bound = alias.asname.name if alias.asname else alias.name
                self.imported.add(bound.value)
        return False

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._bind(node.name.value)
        self.functions.add(node.name.value)
        self._functions_in_class.append(0)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._functions_in_class.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._bind(node.name.value)
        self.functions.add(node.name.value)
        if self._functions_in_class:
            self._functions_in_class[-1] += 1

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        if self._functions_in_class:
            self._functions_in_class[-1] -= 1

    def visit_Param(self, node: cst.Param) -> None:
        self.bound.add(node.name.value)

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._target(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._target(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._target(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._target(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._target(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        self._target(node.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._target(node.target)

    def visit_Global(self, node: cst.Global) -> None:
        self.bound.update(item.name.value for item in node.names)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        self.bound.update(item.name.value for item in node.names)

    def _target(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self._bind(target.value)
        elif isinstance(target, cst.Attribute):
            self.attributes.add(target.attr.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._target(element.value)
        elif isinstance(target, cst.StarredElement):
            self._target(target.value)


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def plan(module: cst.Module, api: Set[str]) -> Tuple[Dict[str, str], Set[str], _Bindings]:
    """old name -> new name, and the attribute names to rename."""
    found = _Bindings()
    module.visit(found)
    kept = found.imported | set(dir(builtins)) | set(keyword.kwlist) | found.in_strings
    # An attribute name that is also an API's keeps its name everywhere: the
    # file's `.step` and an optimizer's `.step` are the same string.
    kept |= found.attributes & api
    candidates = [n for n in sorted(found.bound | found.attributes) if n not in kept and not _dunder(n)]
    mapping: Dict[str, str] = {}
    counter = 0
    for name in candidates:
        while True:
            counter += 1
            new = f"n{counter}"
            if new not in found.seen:
                break
        mapping[name] = new
    attributes = {n for n in found.attributes if n in mapping}
    return mapping, attributes, found


class _Renamer(cst.CSTTransformer):
    def __init__(self, mapping: Dict[str, str], attributes: Set[str], found: _Bindings) -> None:
        self.mapping = mapping
        self.attributes = attributes
        self.found = found

    def visit_Import(self, node) -> bool:
        return False

    def visit_ImportFrom(self, node) -> bool:
        return False

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.Attribute:
        # The attribute's own name follows the attribute rule, not the Name rule.
        attr = original_node.attr.value
        new_attr = self.mapping[attr] if attr in self.attributes else attr
        return updated_node.with_changes(attr=cst.Name(new_attr))

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        new = self.mapping.get(original_node.value)
        return updated_node.with_changes(value=new) if new else updated_node

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        # Keyword arguments follow the function they name: renamed in calls
        # that may reach the file's own functions, kept in calls into
        # imports and builtins.
        own = self._may_reach_own_code(original_node.func)
        args = []
        for original, updated in zip(original_node.args, updated_node.args):
            if original.keyword is not None:
                name = original.keyword.value
                updated = updated.with_changes(keyword=cst.Name(self.mapping.get(name, name) if own else name))
            args.append(updated)
        return updated_node.with_changes(args=args)

    def _may_reach_own_code(self, func: cst.BaseExpression) -> bool:
        """A call of the file's own function, class or object (`train(...)`,
        `net(...)`, `self.encoder(...)`), not of an import's or a builtin's."""
        if isinstance(func, cst.Attribute):
            return func.attr.value in self.attributes or func.attr.value in self.found.functions
        if isinstance(func, cst.Name):
            return func.value not in self.found.imported and not hasattr(builtins, func.value)
        return False


def rename_source(source: str, api: Set[str] = None) -> Tuple[str, Dict[str, str]]:
    """The source with the author's identifiers renamed, and the mapping."""
    module = cst.parse_module(source)
    mapping, attributes, found = plan(module, api if api is not None else api_names())
    renamed = module.visit(_Renamer(mapping, attributes, found))
    return renamed.code, mapping


def rename_tree(source_root: Path, out_root: Path, paths: Iterable[Path]) -> Dict[Path, Path]:
    """Write a renamed copy of each case under out_root (same category folders
    and file names); judged.txt comes along. Returns original -> renamed."""
    api = api_names()
    written = {}
    for path in paths:
        target = out_root / path.parent.name / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text(encoding="utf-8")
        head = text.splitlines(keepends=True)[:4]
        renamed, _ = rename_source(text, api)
        assert renamed.splitlines(keepends=True)[:4] == head  # comments are never renamed
        target.write_text(renamed, encoding="utf-8")
        written[path] = target
    judged = source_root / "judged.txt"
    if judged.exists():
        shutil.copy(judged, out_root / "judged.txt")
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source_root", nargs="?", type=Path, default=HERE)
    parser.add_argument("out_root", nargs="?", type=Path)
    parser.add_argument("--api-names", action="store_true", help=f"rewrite {API_NAMES.name} from torch and numpy")
    args = parser.parse_args(argv)
    if args.api_names:
        return write_api_names()
    if args.out_root is None:
        parser.error("OUT_ROOT is required")
    sys.path.insert(0, str(HERE))
    from cases import case_paths

    written = rename_tree(args.source_root, args.out_root, case_paths(args.source_root))
    print(f"{len(written)} cases renamed into {args.out_root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
