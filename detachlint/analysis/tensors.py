"""Whether an expression is a torch tensor, and which kind.

`x.data` is a tensor's storage only when `x` is a tensor: `dataset.data`
(a numpy array), a batch object's `.data`, a PyG `Data` or the `.data`
field of a `PackedSequence` are something else. This module answers
"tensor, and of which kind" only when the file says so:

- a parameter: what `ValueFacts` calls a parameter, an `nn.Parameter(...)`,
  or a `weight`/`bias`-named attribute (`self.fc.weight`, `m.bias`);
- an activation, a leaf that requires grad, a detached tensor: from
  `ValueFacts`;
- a gradient: `x.grad`;
- some other tensor: what a `torch.*` function or a tensor method returns,
  or a name bound to one.

Anything else is "not known to be a tensor" (None), and rules that need a
tensor stay quiet.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import TYPE_CHECKING, Dict, Optional

import libcst as cst

from detachlint.analysis.names import dotted
from detachlint.analysis.values import Holds

if TYPE_CHECKING:  # pragma: no cover
    from detachlint.analysis import Facts


class TensorKind(Enum):
    PARAMETER = "parameter"
    ACTIVATION = "activation"
    LEAF = "leaf"
    GRADIENT = "gradient"
    DETACHED = "detached"
    OTHER = "tensor"


# `weight`, `bias`, `in_proj_weight`, `weight_ih_l0`, `q_bias`, `weight_orig`.
_PARAMETER_ATTRIBUTE = re.compile(r"(?:\w+_)?(?:weight|bias)(?:_[a-z0-9]+)*")
# Things that hold no tensor at all, whatever else the file says.
_NOT_TENSORS = Holds.MODEL | Holds.OPTIMIZER | Holds.CRITERION | Holds.NUMBER
# `torch.<name>` functions that return something other than a tensor.
_NOT_TENSOR_FUNCTIONS = {
    "load", "save", "device", "dtype", "no_grad", "enable_grad", "inference_mode", "set_grad_enabled",
    "is_grad_enabled", "manual_seed", "seed", "initial_seed", "is_tensor", "is_floating_point",
    "is_complex", "numel", "compile", "get_default_dtype", "set_default_dtype", "typename", "finfo",
    "iinfo", "set_printoptions", "use_deterministic_algorithms", "get_rng_state", "set_rng_state",
    "broadcast_shapes", "result_type", "promote_types", "can_cast", "is_nonzero", "equal", "allclose",
    "split", "chunk", "unbind", "tensor_split", "meshgrid", "sort", "topk", "max", "min", "unique",
}
# Tensor methods whose result is not a tensor.
_NOT_TENSOR_METHODS = {
    "item", "tolist", "numpy", "size", "dim", "ndimension", "numel", "element_size", "nelement",
    "data_ptr", "stride", "storage", "untyped_storage", "is_contiguous", "get_device", "type",
    "split", "chunk", "unbind", "tensor_split", "sort", "topk", "max", "min", "unique", "register_hook",
    "backward", "__len__", "all", "any",
}
# torch.nn.utils.rnn builds PackedSequence objects: their `.data` is a field.
_PACKING = "torch.nn.utils.rnn."

_BY_HOLDS = (
    (Holds.PARAM, TensorKind.PARAMETER),
    (Holds.LEAF, TensorKind.LEAF),
    (Holds.ACTIVATION | Holds.LOSS, TensorKind.ACTIVATION),
    (Holds.DATA | Holds.DETACHED, TensorKind.DETACHED),
)


class TensorFacts:
    """`kind(expr)`: the kind of tensor `expr` evaluates to, or None."""

    def __init__(self, facts: "Facts") -> None:
        self.facts = facts
        self._cache: Dict[cst.CSTNode, Optional[TensorKind]] = {}
        self._busy: set = set()
        packs = [
            call
            for call in facts.index.nodes(cst.Call)
            if (facts.names.qualified(call.func) or "").startswith(_PACKING)
        ]
        # Functions that pack sequences: what their modules return may be a
        # PackedSequence, whose `.data` is not `Tensor.data`.
        self._packing_scopes = {facts.index.scope_of(call) for call in packs}

    def kind(self, expr: cst.CSTNode) -> Optional[TensorKind]:
        if expr in self._cache:
            return self._cache[expr]
        if expr in self._busy:
            return None
        self._busy.add(expr)
        try:
            result = self._evaluate(expr)
        finally:
            self._busy.discard(expr)
        self._cache[expr] = result
        return result

    def is_tensor(self, expr: cst.CSTNode) -> bool:
        return self.kind(expr) is not None

    def in_packing_scope(self, node: cst.CSTNode) -> bool:
        """Whether `node` runs in a function that packs sequences."""
        return self.facts.index.scope_of(node) in self._packing_scopes

    def _evaluate(self, expr: cst.CSTNode) -> Optional[TensorKind]:
        facts = self.facts
        if isinstance(expr, cst.Call) and (facts.names.qualified(expr.func) or "").startswith(_PACKING):
            return None
        if isinstance(expr, cst.Attribute):
            attribute = self._attribute(expr)
            if attribute is not None or expr.attr.value in ("grad", "data"):
                return attribute
        holds = facts.values.holds(expr)
        if holds & _NOT_TENSORS and not holds & (Holds.PARAM | Holds.LEAF | Holds.ACTIVATION | Holds.LOSS):
            return None
        for flags, kind in _BY_HOLDS:
            if holds & flags:
                if kind is TensorKind.ACTIVATION and self._maybe_packed(expr):
                    return None
                return kind
        if isinstance(expr, cst.Call):
            return self._call(expr)
        if isinstance(expr, cst.Name):
            return self._name(expr)
        if isinstance(expr, cst.Subscript):
            inner = self.kind(expr.value)
            return TensorKind.ACTIVATION if inner in (TensorKind.PARAMETER, TensorKind.LEAF) else inner
        return None

    def _attribute(self, expr: cst.Attribute) -> Optional[TensorKind]:
        attr = expr.attr.value
        if attr == "grad":
            # Only tensors have a `.grad` worth reading; models, optimizers and numbers do not.
            return None if self.facts.values.holds(expr.value) & _NOT_TENSORS else TensorKind.GRADIENT
        if attr == "data":
            return TensorKind.DETACHED if self.kind(expr.value) is not None else None
        if _PARAMETER_ATTRIBUTE.fullmatch(attr) and dotted(expr.value) is not None:
            if self.kind(expr.value) is None:  # `x.T` of a tensor is no parameter
                return TensorKind.PARAMETER
        return None

    def _call(self, call: cst.Call) -> Optional[TensorKind]:
        facts = self.facts
        qualified = facts.names.qualified(call.func)
        if qualified is not None:
            if qualified == "torch.nn.Parameter":
                return TensorKind.PARAMETER
            if qualified == "torch.autograd.Variable" or re.fullmatch(r"torch\.\w*Tensor", qualified):
                return TensorKind.OTHER
            head, _, last = qualified.rpartition(".")
            if head == "torch" and last[:1].islower() and last not in _NOT_TENSOR_FUNCTIONS:
                return TensorKind.OTHER
            if head == "torch.nn.functional":
                return TensorKind.OTHER
            return None
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value not in _NOT_TENSOR_METHODS:
            receiver = self.kind(func.value)
            if receiver is TensorKind.PARAMETER:
                return TensorKind.ACTIVATION
            if receiver is not None:
                return TensorKind.DETACHED if func.attr.value == "detach" else receiver
        return None

    def _name(self, name: cst.Name) -> Optional[TensorKind]:
        entry = self.facts.values.scope(name).assignment_before(name.value, name)
        loop = self._binding_loop(name)
        if loop is not None and (entry is None or entry[1] is loop or self.facts.index.before(entry[1], loop)):
            # The loop's own binding: what it iterates over decides.
            return TensorKind.PARAMETER if _iterates_parameters(loop.target, loop.iter, name.value) else None
        if entry is None:
            return self._annotated(name)
        _, node, value, _ = entry
        if value is None or not isinstance(node, (cst.Assign, cst.AnnAssign)):
            return None
        if isinstance(node, cst.Assign) and any(not isinstance(t.target, cst.Name) for t in node.targets):
            return None  # unpacking: which element is which is not known
        return self.kind(value)

    def _annotated(self, name: cst.Name) -> Optional[TensorKind]:
        """A parameter of the enclosing function annotated `torch.Tensor` or `nn.Parameter`."""
        scope = self.facts.index.scope_of(name)
        if not isinstance(scope, cst.FunctionDef):
            return None
        for param in (*scope.params.posonly_params, *scope.params.params, *scope.params.kwonly_params):
            if param.name.value == name.value and param.annotation is not None:
                qualified = self.facts.names.qualified(param.annotation.annotation)
                if qualified == "torch.nn.Parameter":
                    return TensorKind.PARAMETER
                if qualified == "torch.Tensor":
                    return TensorKind.OTHER
        return None

    def _binding_loop(self, name: cst.Name) -> Optional[cst.For]:
        """The innermost `for` of the same function whose target binds `name`
        and whose body holds it."""
        index = self.facts.index
        scope = index.scope_of(name)
        for ancestor in index.ancestors(name):
            if ancestor is scope:
                return None
            if isinstance(ancestor, cst.For) and index.is_inside(name, ancestor.body):
                if name.value in _target_names(ancestor.target):
                    return ancestor
        return None

    def _maybe_packed(self, expr: cst.CSTNode) -> bool:
        """A module's output in a function that packs sequences: maybe a PackedSequence."""
        return self.in_packing_scope(expr)

    # Whose parameter ---------------------------------------------------------

    def parameter_owner(self, expr: cst.CSTNode) -> Optional[str]:
        """The module a parameter belongs to, as written: `self.fc` for
        `self.fc.weight`, `target_net` for `p` in
        `for p in target_net.parameters()` (`zip(...)` and
        `named_parameters()` too); None when not known."""
        if isinstance(expr, cst.Attribute):
            return dotted(expr.value)
        if not isinstance(expr, cst.Name):
            return None
        for loop in self.facts.index.nodes(cst.For):
            if self.facts.index.scope_of(loop) is not self.facts.index.scope_of(expr):
                continue
            if not self.facts.index.is_inside(expr, loop.body):
                continue
            owner = _iterated_owner(loop.target, loop.iter, expr.value)
            if owner is not None:
                return owner
        return None


def _iterated_owner(target: cst.BaseExpression, iterable: cst.BaseExpression, wanted: str) -> Optional[str]:
    if isinstance(iterable, cst.Call) and dotted(iterable.func) == "zip" and isinstance(target, (cst.Tuple, cst.List)):
        for element, arg in zip(target.elements, iterable.args):
            owner = _iterated_owner(element.value, arg.value, wanted)
            if owner is not None:
                return owner
        return None
    names = [target] if isinstance(target, cst.Name) else [e.value for e in getattr(target, "elements", ())]
    if not any(isinstance(n, cst.Name) and n.value == wanted for n in names):
        return None
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute):
        if iterable.func.attr.value in ("parameters", "named_parameters"):
            return dotted(iterable.func.value)
    return None


def _target_names(target: cst.BaseExpression):
    if isinstance(target, cst.Name):
        return {target.value}
    names = set()
    for element in getattr(target, "elements", ()):
        names |= _target_names(element.value)
    return names


def _iterates_parameters(target: cst.BaseExpression, iterable: cst.BaseExpression, name: str) -> bool:
    """Whether the loop binds `name` to a parameter: `for p in model.parameters()`,
    `model.named_parameters()`, `group["params"]`, and `zip(...)` of them."""
    if isinstance(iterable, cst.Call) and dotted(iterable.func) == "zip" and isinstance(target, (cst.Tuple, cst.List)):
        return any(
            name in _target_names(element.value) and _iterates_parameters(element.value, arg.value, name)
            for element, arg in zip(target.elements, iterable.args)
        )
    if isinstance(target, (cst.Tuple, cst.List)):
        # `for name, p in model.named_parameters()`: the last element is the tensor.
        last = target.elements[-1].value if target.elements else None
        if not (isinstance(last, cst.Name) and last.value == name):
            return False
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Attribute):
        return iterable.func.attr.value in ("parameters", "named_parameters")
    if not isinstance(iterable, cst.Subscript) or len(iterable.slice) != 1:
        return False
    index = iterable.slice[0].slice
    return (
        isinstance(index, cst.Index)
        and isinstance(index.value, cst.SimpleString)
        and index.value.evaluated_value == "params"
    )
