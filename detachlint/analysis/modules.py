"""Which classes are `nn.Module`s, what they hold, and what is frozen.

A class is a module when a base resolves to a `torch.nn` module class or a
Lightning module, when a base is another module class of the same file, or
when its base is unknown to us but it defines `forward` and builds
`torch.nn` layers. Members are the `self.name = ...` assignments of its
methods whose value is a layer, a container of layers, a module class of
this file, or an `nn.Parameter`. A member is trainable when it holds
parameters that require grad; it is frozen when the file turns their
`requires_grad` off (`requires_grad_(False)`, `p.requires_grad = False`
over its parameters, `freeze(...)`-style helpers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Dict, Iterator, Optional, Set

import libcst as cst

from detachlint.analysis.index import FileIndex
from detachlint.analysis.names import ImportTable, dotted
from detachlint.analysis.vocabulary import PARAMETER_ITERATORS, SUBMODULE_ITERATORS
from detachlint.analysis.priors import FREEZE_HELPER_NAME, FROZEN_BY_NAME

_MODULE_BASES = {
    "torch.nn.Module",
    "lightning.LightningModule",
    "lightning.pytorch.LightningModule",
    "pytorch_lightning.LightningModule",
    "lightning.pytorch.core.LightningModule",
    "pytorch_lightning.core.LightningModule",
}

# torch.nn layers that own no parameters (whatever their arguments).
_PARAMETER_FREE = re.compile(
    r"(Identity|ReLU6?|LeakyReLU|R?R?eLU|GELU|SiLU|Mish|ELU|SELU|CELU|Sigmoid|Tanh|"
    r"Softmax2?d?|Softmin|LogSoftmax|Softplus|Softsign|Softshrink|Hardtanh|Hardswish|"
    r"Hardsigmoid|Hardshrink|Tanhshrink|Threshold|GLU|LogSigmoid|"
    r"\w*Dropout\w*|\w*Pool\dd|Flatten|Unflatten|Upsample\w*|PixelShuffle|"
    r"PixelUnshuffle|ChannelShuffle|\w*Pad\dd|CosineSimilarity|PairwiseDistance|"
    r"Fold|Unfold|\w*Loss)"
)
# What a loop over `model.parameters()` or `model.children()` iterates over.
_ITERATED_MEMBERS = PARAMETER_ITERATORS | SUBMODULE_ITERATORS
_CONTAINERS = {"Sequential", "ModuleList", "ModuleDict"}
# Layers whose parameters hang on an `affine`-like flag, and its default.
_AFFINE_FLAG = {
    "LayerNorm": ("elementwise_affine", True),
    "GroupNorm": ("affine", True),
    "InstanceNorm1d": ("affine", False),
    "InstanceNorm2d": ("affine", False),
    "InstanceNorm3d": ("affine", False),
    "BatchNorm1d": ("affine", True),
    "BatchNorm2d": ("affine", True),
    "BatchNorm3d": ("affine", True),
}


@dataclass
class Member:
    name: str
    kind: str  # "module" or "parameter"
    trainable: bool
    value: cst.BaseExpression = field(repr=False)


@dataclass
class ModuleClass:
    name: str
    node: cst.ClassDef = field(repr=False)
    members: Dict[str, Member] = field(default_factory=dict)
    methods: Dict[str, cst.FunctionDef] = field(default_factory=dict, repr=False)
    frozen: Set[str] = field(default_factory=set)
    frozen_whole: bool = False

    def trainable_members(self) -> Set[str]:
        if self.frozen_whole:
            return set()
        return {
            name
            for name, member in self.members.items()
            if member.trainable and name not in self.frozen and not FROZEN_BY_NAME.search(name)
        }


def _keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def _is_false(arg: Optional[cst.Arg]) -> bool:
    return arg is not None and isinstance(arg.value, cst.Name) and arg.value.value == "False"


def _self_attribute(expr: cst.BaseExpression, index) -> Optional[str]:
    if (
        isinstance(expr, cst.Attribute)
        and index.is_receiver(expr.value)
    ):
        return expr.attr.value
    return None


def _attribute_chain_tail(expr: cst.BaseExpression) -> Optional[str]:
    """`encoder` for `self.encoder`, `model.encoder` or `encoder`."""
    if isinstance(expr, cst.Attribute):
        return expr.attr.value
    if isinstance(expr, cst.Name):
        return expr.value
    return None


class ModuleFacts:
    def __init__(self, index: FileIndex, names: ImportTable) -> None:
        self._index = index
        self._names = names
        self.classes: Dict[str, ModuleClass] = {}
        self._by_node: Dict[cst.ClassDef, ModuleClass] = {}
        self._trainable_cache: Dict[str, bool] = {}
        self._collect_classes()
        frozen = self._frozen_names()
        # Every name (member, attribute, loop source) the file freezes.
        self.frozen_names: Set[str] = frozen
        # Names (last part: `encoder` for `self.encoder`) whose parameters the file freezes.
        self.frozen_names = frozenset(frozen)
        for module_class in self.classes.values():
            self._collect_members(module_class)
            module_class.frozen = frozen & set(module_class.members)
            module_class.frozen_whole = self._freezes_itself(module_class)

    # Classes -------------------------------------------------------------

    def _collect_classes(self) -> None:
        # Two rounds settle a local base declared after its subclass.
        for _ in range(2):
            for node in self._index.nodes(cst.ClassDef):
                if node in self._by_node:
                    continue
                if self._is_module_class(node):
                    module_class = ModuleClass(node.name.value, node)
                    for statement in node.body.body:
                        if isinstance(statement, cst.FunctionDef):
                            module_class.methods[statement.name.value] = statement
                    self.classes[module_class.name] = module_class
                    self._by_node[node] = module_class

    def _is_module_class(self, node: cst.ClassDef) -> bool:
        unknown_base = False
        for base in node.bases:
            if base.keyword is not None:
                continue
            name = self._names.qualified(base.value)
            if name in _MODULE_BASES or self._is_nn_class(name):
                return True
            local = dotted(base.value)
            if local in self.classes:
                return True
            if name is None or not name.startswith("torch."):
                unknown_base = True
        if not unknown_base:
            return False
        # A base from another package: a module if it looks like one.
        has_forward = any(
            isinstance(s, cst.FunctionDef) and s.name.value == "forward" for s in node.body.body
        )
        if not has_forward:
            return False
        for assign in self._index.descendants(node, cst.Assign):
            if isinstance(assign.value, cst.Call) and self._is_nn_class(
                self._names.qualified(assign.value.func)
            ):
                return True
        return False

    @staticmethod
    def _is_nn_class(name: Optional[str]) -> bool:
        if not name or not name.startswith("torch.nn."):
            return False
        last = name.rsplit(".", 1)[-1]
        return last[:1].isupper() and last not in ("Parameter", "Buffer") and ".functional." not in name

    def class_of(self, node: cst.CSTNode) -> Optional[ModuleClass]:
        """The module class whose body holds `node`."""
        for ancestor in self._index.ancestors(node):
            if isinstance(ancestor, cst.ClassDef):
                return self._by_node.get(ancestor)
        return None

    def class_for(self, node: cst.ClassDef) -> Optional[ModuleClass]:
        """The module class a class statement defines, None when it is no module."""
        return self._by_node.get(node)

    def builds_parameters(self, call: cst.Call) -> bool:
        """Whether the module `call` builds owns parameters (`nn.Linear(...)`, not `nn.ReLU()`)."""
        return self._builds_parameters(call)

    def module_class_named(self, name: str) -> Optional[ModuleClass]:
        return self.classes.get(name)

    def is_module_constructor(self, call: cst.Call) -> bool:
        """`nn.Linear(...)`, `MyNet(...)`: a call that builds a module."""
        name = self._names.qualified(call.func)
        if self._is_nn_class(name) and not name.endswith("Loss"):
            return True
        local = dotted(call.func)
        return local in self.classes

    def is_loss_constructor(self, call: cst.Call) -> bool:
        name = self._names.qualified(call.func)
        return bool(name and name.startswith("torch.nn.") and name.endswith("Loss"))

    # Members -------------------------------------------------------------

    def _collect_members(self, module_class: ModuleClass) -> None:
        for base in module_class.node.bases:
            inherited = self.classes.get(dotted(base.value) or "")
            if inherited is not None and inherited is not module_class:
                if not inherited.members:
                    self._collect_members(inherited)
                for name, member in inherited.members.items():
                    module_class.members.setdefault(name, member)
        for assign in self._index.descendants(module_class.node, cst.Assign):
            for target in assign.targets:
                name = _self_attribute(target.target, self._index)
                if name is None:
                    continue
                member = self._member(name, assign.value, module_class)
                if member is not None:
                    old = module_class.members.get(name)
                    if old is None or (member.trainable and not old.trainable):
                        module_class.members[name] = member

    def _member(self, name: str, value: cst.BaseExpression, owner: ModuleClass) -> Optional[Member]:
        if not isinstance(value, cst.Call):
            return None
        qualified = self._names.qualified(value.func)
        if qualified == "torch.nn.Parameter":
            trainable = not _is_false(_keyword(value, "requires_grad"))
            if len(value.args) > 1 and value.args[1].keyword is None:
                trainable = not _is_false(value.args[1])
            return Member(name, "parameter", trainable, value)
        if self.is_module_constructor(value):
            return Member(name, "module", self._builds_parameters(value, owner), value)
        return None

    def _builds_parameters(self, call: cst.Call, owner: Optional[ModuleClass] = None) -> bool:
        qualified = self._names.qualified(call.func)
        if qualified and qualified.startswith("torch.nn."):
            last = qualified.rsplit(".", 1)[-1]
            if last in _CONTAINERS:
                return self._container_builds_parameters(call)
            if _PARAMETER_FREE.fullmatch(last):
                return False
            if last in _AFFINE_FLAG:
                flag, default = _AFFINE_FLAG[last]
                arg = _keyword(call, flag)
                if arg is None:
                    return default
                return not _is_false(arg)
            return True
        local = self.classes.get(dotted(call.func) or "")
        if local is None or local is owner:
            return True
        if local.name not in self._trainable_cache:
            self._trainable_cache[local.name] = True  # guards recursion
            if not local.members:
                self._collect_members(local)
            self._trainable_cache[local.name] = bool(local.members) and any(
                m.trainable for m in local.members.values()
            ) or not local.members
        return self._trainable_cache[local.name]

    def _container_builds_parameters(self, call: cst.Call) -> bool:
        elements = []
        for arg in call.args:
            value = arg.value
            if isinstance(value, (cst.List, cst.Tuple)):
                elements.extend(e.value for e in value.elements)
            elif isinstance(value, cst.Dict):
                elements.extend(e.value for e in value.elements if isinstance(e, cst.DictElement))
            else:
                elements.append(value)
        for element in elements:
            if not isinstance(element, cst.Call):
                return True  # a comprehension or a name: assume layers
            if self._builds_parameters(element):
                return True
        return False

    # Freezing -------------------------------------------------------------

    def _frozen_names(self) -> Set[str]:
        """Names of objects whose parameters the file sets to not require grad."""
        frozen: Set[str] = set()
        for call in self._index.nodes(cst.Call):
            func = call.func
            if not isinstance(func, cst.Attribute):
                helper = dotted(func)
                if helper and FREEZE_HELPER_NAME.search(helper.rsplit(".", 1)[-1]) and call.args:
                    tail = _attribute_chain_tail(call.args[0].value)
                    if tail and (len(call.args) < 2 or _is_false(call.args[1]) or "freeze" in helper.lower()):
                        frozen.add(tail)
                continue
            method = func.attr.value
            if method == "requires_grad_" and call.args and _is_false(call.args[0]):
                frozen.update(self._owners(func.value))
            elif FREEZE_HELPER_NAME.search(method) and "un" not in method.lower() and not call.args:
                # `self.encoder.freeze()` style methods.
                if "freeze" in method.lower():
                    frozen.update(self._owners(func.value))
        for assign in self._index.nodes(cst.Assign):
            value = assign.value
            for target in assign.targets:
                t = target.target
                if not isinstance(t, cst.Attribute):
                    continue
                if t.attr.value == "requires_grad" and isinstance(value, cst.Name) and value.value == "False":
                    frozen.update(self._owners(t.value))
                elif self._is_frozen_parameter(value) and _self_attribute(t, self._index) is None:
                    # `self.emb.weight = nn.Parameter(w, requires_grad=False)`
                    frozen.update(self._owners(t.value))
        return frozen

    def _is_frozen_parameter(self, value: cst.BaseExpression) -> bool:
        if not isinstance(value, cst.Call) or self._names.qualified(value.func) != "torch.nn.Parameter":
            return False
        flag = _keyword(value, "requires_grad")
        if flag is None and len(value.args) > 1 and value.args[1].keyword is None:
            flag = value.args[1]
        return flag is not None and _is_false(flag)

    def _owners(self, expr: cst.BaseExpression) -> Iterator[str]:
        """Member names whose parameters `expr` stands for."""
        # `self.encoder.weight` -> encoder; a loop variable over
        # `self.encoder.parameters()` -> encoder.
        if isinstance(expr, cst.Attribute):
            if _self_attribute(expr, self._index) is not None:
                yield expr.attr.value
                return
            yield from self._owners(expr.value)
            yield expr.attr.value
            return
        if isinstance(expr, cst.Subscript):
            yield from self._owners(expr.value)
            return
        if isinstance(expr, cst.Name):
            yield from self._loop_sources(expr)

    def _loop_sources(self, name: cst.Name) -> Iterator[str]:
        loop = None
        for ancestor in self._index.ancestors(name):
            if isinstance(ancestor, cst.For):
                loop = ancestor
                break
        while loop is not None:
            yield from self._iterated_owners(loop.target, loop.iter, name.value)
            loop = self._index.enclosing(loop, cst.For)

    def _iterated_owners(self, target, iterable, wanted: str) -> Iterator[str]:
        if isinstance(target, cst.Name):
            if target.value == wanted:
                yield from self._iterable_owners(iterable)
            return
        if not isinstance(target, (cst.Tuple, cst.List)):
            return
        names = [e.value for e in target.elements]
        if isinstance(iterable, cst.Call) and dotted(iterable.func) == "zip":
            for element, arg in zip(names, iterable.args):
                yield from self._iterated_owners(element, arg.value, wanted)
        elif any(isinstance(n, cst.Name) and n.value == wanted for n in names):
            # `for name, p in self.encoder.named_parameters()`
            yield from self._iterable_owners(iterable)

    def _iterable_owners(self, iterable: cst.BaseExpression) -> Iterator[str]:
        if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute):
            if iterable.func.attr.value in _ITERATED_MEMBERS:
                yield from self._owners(iterable.func.value)
        elif isinstance(iterable, (cst.List, cst.Tuple)):
            for element in iterable.elements:
                yield from self._owners(element.value)

    @cached_property
    def any_frozen_at_construction(self) -> bool:
        return any(self.frozen_at_construction(klass) for klass in self._by_node)

    def frozen_at_construction(self, klass: cst.ClassDef) -> bool:
        """Whether the module class turns `requires_grad` off on all its
        parameters in its own `__init__` (`self.requires_grad_(False)`, or
        over `self.parameters()`): frozen for life, its forward records no
        graph of its own."""
        module_class = self._by_node.get(klass)
        init = module_class.methods.get("__init__") if module_class is not None else None
        return init is not None and self._freezes_itself(module_class, init)

    def _freezes_itself(self, module_class: ModuleClass, within: Optional[cst.CSTNode] = None) -> bool:
        within = module_class.node if within is None else within
        for call in self._index.descendants(within, cst.Call):
            func = call.func
            if (
                isinstance(func, cst.Attribute)
                and func.attr.value == "requires_grad_"
                and self._index.is_receiver(func.value)
                and call.args
                and _is_false(call.args[0])
            ):
                return True
        for loop in self._index.descendants(within, cst.For):
            it = loop.iter
            if (
                isinstance(it, cst.Call)
                and isinstance(it.func, cst.Attribute)
                and it.func.attr.value == "parameters"
                and self._index.is_receiver(it.func.value)
                and "requires_grad" in cst.Module([]).code_for_node(loop.body)
            ):
                return True
        return False
