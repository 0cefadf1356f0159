"""Qualified torch names through any import alias.

`import torch as th`, `from torch import nn, no_grad` and
`import torch.nn.functional as F` all end up in one table mapping a local
name to the dotted name it stands for, so `th.no_grad`, `no_grad` and
`torch.no_grad` all answer "torch.no_grad". Names that were never imported
resolve to nothing: a local `def no_grad()` is not torch's.
"""

from __future__ import annotations

from typing import Dict, Iterator, Optional

import libcst as cst

from detachlint.analysis.index import FileIndex

# Public spellings that live elsewhere in torch's package tree.
_CANONICAL = {
    "torch.autograd.no_grad": "torch.no_grad",
    "torch.autograd.grad_mode.no_grad": "torch.no_grad",
    "torch.autograd.enable_grad": "torch.enable_grad",
    "torch.autograd.grad_mode.enable_grad": "torch.enable_grad",
    "torch.autograd.set_grad_enabled": "torch.set_grad_enabled",
    "torch.autograd.grad_mode.set_grad_enabled": "torch.set_grad_enabled",
    "torch.autograd.inference_mode": "torch.inference_mode",
    "torch.autograd.grad_mode.inference_mode": "torch.inference_mode",
    "torch.nn.modules.module.Module": "torch.nn.Module",
    "torch.nn.modules.Module": "torch.nn.Module",
    "torch.nn.parameter.Parameter": "torch.nn.Parameter",
    "torch.autograd.variable.Variable": "torch.autograd.Variable",
}


def dotted(expr: cst.BaseExpression) -> Optional[str]:
    """`a.b.c` for a chain of attributes over a name, else None."""
    # Called for most calls and names by several rules: type() is much
    # faster than isinstance() on libcst's node classes (abstract base classes).
    if type(expr) is cst.Name:
        return expr.value
    parts = []
    while type(expr) is cst.Attribute:
        parts.append(expr.attr.value)
        expr = expr.value
    if type(expr) is not cst.Name:
        return None
    parts.append(expr.value)
    return ".".join(reversed(parts))


def target_names(target: cst.BaseExpression) -> Iterator[str]:
    """The names an assignment target binds: `a`, `a, (b, *c)`."""
    if isinstance(target, cst.Name):
        yield target.value
    elif isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from target_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from target_names(target.value)


def unpacked_position(node: cst.CSTNode, name: str, from_one_value: bool = False) -> Optional[int]:
    """The position at which the assignment `node` unpacks `name`
    (`a, name = ...`); with `from_one_value`, None when the value is a
    tuple or list written out (`a, b = x, y` binds element by element)."""
    if not isinstance(node, cst.Assign):
        return None
    if from_one_value and isinstance(node.value, (cst.Tuple, cst.List)):
        return None
    for target in node.targets:
        if isinstance(target.target, (cst.Tuple, cst.List)):
            for i, element in enumerate(target.target.elements):
                if isinstance(element.value, cst.Name) and element.value.value == name:
                    return i
    return None


def all_params(params: cst.Parameters) -> Iterator[cst.Param]:
    """Every parameter of a signature, `*args` included."""
    yield from params.posonly_params
    yield from params.params
    yield from params.kwonly_params
    if isinstance(params.star_arg, cst.Param):
        yield params.star_arg


def string_value(expr: Optional[cst.BaseExpression]) -> Optional[str]:
    """The text of a plain string literal."""
    if isinstance(expr, cst.SimpleString):
        value = expr.evaluated_value
        return value if isinstance(value, str) else None
    return None


def string_key(expr: cst.Subscript) -> Optional[str]:
    """`"kl"` for `losses["kl"]`."""
    if len(expr.slice) != 1 or not isinstance(expr.slice[0].slice, cst.Index):
        return None
    return string_value(expr.slice[0].slice.value)


def _module_name(node: cst.BaseExpression) -> str:
    return dotted(node) or ""


class ImportTable:
    """Local name -> fully qualified name, for every import in the file."""

    def __init__(self, index: FileIndex) -> None:
        self.aliases: Dict[str, str] = {}
        for node in index.nodes(cst.Import):
            for alias in node.names:
                full = _module_name(alias.name)
                if alias.asname is not None:
                    local = alias.asname.name
                    if isinstance(local, cst.Name):
                        self.aliases[local.value] = full
                else:
                    # `import torch.nn` binds `torch`.
                    top = full.split(".")[0]
                    self.aliases[top] = top
        for node in index.nodes(cst.ImportFrom):
            if node.relative or node.module is None:
                continue
            if isinstance(node.names, cst.ImportStar):
                continue
            base = _module_name(node.module)
            for alias in node.names:
                name = _module_name(alias.name)
                local = name
                if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                    local = alias.asname.name.value
                self.aliases[local] = f"{base}.{name}"

    def local_name(self, qualified: str) -> Optional[str]:
        """How this file spells `qualified` (`th` after `import torch as th`),
        or None when nothing imports it."""
        best = None
        for local, full in self.aliases.items():
            if full == qualified:
                return local
            if qualified.startswith(full + ".") and best is None:
                best = local + qualified[len(full):]
        return best

    @property
    def uses_torch(self) -> bool:
        return any(q == "torch" or q.startswith("torch.") for q in self.aliases.values())

    def qualified(self, expr: cst.BaseExpression) -> Optional[str]:
        """The qualified name `expr` refers to through imports, if any."""
        name = dotted(expr)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        base = self.aliases.get(head)
        if base is None:
            return None
        full = f"{base}.{rest}" if rest else base
        return _CANONICAL.get(full, full)

    def is_torch(self, expr: cst.BaseExpression, *names: str) -> bool:
        return self.qualified(expr) in names

    def call_name(self, node: cst.CSTNode) -> Optional[str]:
        """The qualified name of the function a call calls."""
        if isinstance(node, cst.Call):
            return self.qualified(node.func)
        return None


def constructors(receiver: cst.BaseExpression, index: FileIndex) -> Optional[list]:
    """The calls every binding of `receiver` makes (`self.ret_rms` in its
    class, or a name in its scope): `[RunningMeanStd(shape=())]` for
    `self.ret_rms = RunningMeanStd(shape=())`. None when some binding is
    no call, or nothing binds it."""
    if isinstance(receiver, cst.Attribute) and index.is_receiver(receiver.value):
        scope = index.enclosing(receiver, cst.ClassDef)
        attr = receiver.attr.value

        def binds(target: cst.BaseExpression, assign: cst.Assign) -> bool:
            return (
                isinstance(target, cst.Attribute)
                and index.is_receiver(target.value)
                and target.attr.value == attr
            )

    elif isinstance(receiver, cst.Name):
        scope = index.scope_of(receiver)
        name = receiver.value

        def binds(target: cst.BaseExpression, assign: cst.Assign) -> bool:
            return isinstance(target, cst.Name) and target.value == name and index.scope_of(assign) is scope

    else:
        return None
    if scope is None:
        return None
    values = [a.value for a in index.descendants(scope, cst.Assign) if any(binds(t.target, a) for t in a.targets)]
    if not values or not all(isinstance(v, cst.Call) for v in values):
        return None
    return values


def built_by_import(receiver: cst.BaseExpression, index: FileIndex, names: "ImportTable") -> bool:
    """Whether every binding of `receiver` calls something imported
    (`self.ret_rms = RunningMeanStd(shape=())`): an object of another
    module, whose methods are not the file's methods of the same name."""
    calls = constructors(receiver, index)
    return calls is not None and all(names.qualified(call.func) is not None for call in calls)
