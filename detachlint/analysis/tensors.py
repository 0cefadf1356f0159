"""Whether an expression is a torch tensor, and which kind.

`x.data` is a tensor's storage only when `x` is a tensor: `dataset.data`
(a numpy array), a batch object's `.data`, a PyG `Data` or the `.data`
field of a `PackedSequence` are something else. This module answers
"tensor, and of which kind" only when the file says so:

- a parameter: what `ValueFacts` calls a parameter, an `nn.Parameter(...)`,
  a `weight`/`bias`-named attribute (`self.fc.weight`, `m.bias`) or one
  named like a trainable `nn.Parameter` member of this file's modules
  (`m.pweight`), an item of `dict(model.named_parameters())`;
- an activation, a leaf that requires grad, a detached tensor: from
  `ValueFacts`;
- a gradient: `x.grad`;
- some other tensor: what a `torch.*` function or a tensor method returns,
  or a name bound to one.

Anything else is "not known to be a tensor" (None), and rules that need a
tensor stay quiet.

Two shape facts: `is_scalar(expr)`, a 0-dim tensor (a loss, a full
reduction, a value `backward()` is called on without `gradient`), and
`may_change_shape(value)`, a slice, selection or sized factory whose shape
need not be its source's.
"""

from __future__ import annotations

import re
from enum import Enum
from functools import cached_property
from typing import TYPE_CHECKING, Dict, Optional

import libcst as cst

from detachlint.analysis.names import dotted, target_names
from detachlint.analysis.values import GRAD, Holds, is_loss_function
from detachlint.analysis.vocabulary import NOT_TENSOR_FUNCTIONS, NOT_TENSOR_METHODS, SIZED_FACTORIES
from detachlint.analysis.priors import PARAMETER_ATTRIBUTE_NAME

if TYPE_CHECKING:  # pragma: no cover
    from detachlint.analysis import Facts


class TensorKind(Enum):
    PARAMETER = "parameter"
    ACTIVATION = "activation"
    LEAF = "leaf"
    GRADIENT = "gradient"
    DETACHED = "detached"
    OTHER = "tensor"


# Things that hold no tensor at all, whatever else the file says.
_NOT_TENSORS = Holds.MODEL | Holds.OPTIMIZER | Holds.CRITERION | Holds.NUMBER
# Reductions over every element when called without a dimension.
_FULL_REDUCTIONS = {"mean", "sum", "norm", "prod", "std", "var", "logsumexp"}
# Selections and joins whose result may have another shape than their input.
_SHAPE_CHANGING = {"index_select", "narrow", "masked_select", "pad", "cat", "stack", "take", "gather", "repeat"}
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
            if self._parameter_mapping(expr.value):
                return TensorKind.PARAMETER  # `params[name]` of `params = dict(model.named_parameters())`
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
        if (PARAMETER_ATTRIBUTE_NAME.fullmatch(attr) or attr in self._parameter_members) and dotted(expr.value) is not None:
            if self.kind(expr.value) is None:  # `x.T` of a tensor is no parameter
                return TensorKind.PARAMETER
        return None

    @cached_property
    def _parameter_members(self) -> frozenset:
        """Names of the trainable `nn.Parameter` members of this file's module
        classes (`self.pweight = nn.Parameter(...)`): `m.pweight` is one."""
        return frozenset(
            name
            for module_class in self.facts.modules.classes.values()
            for name, member in module_class.members.items()
            if member.kind == "parameter" and member.trainable
        )

    def _call(self, call: cst.Call) -> Optional[TensorKind]:
        facts = self.facts
        qualified = facts.names.qualified(call.func)
        if qualified is not None:
            if qualified == "torch.nn.Parameter":
                return TensorKind.PARAMETER
            if qualified == "torch.autograd.Variable" or re.fullmatch(r"torch\.\w*Tensor", qualified):
                return TensorKind.OTHER
            head, _, last = qualified.rpartition(".")
            if head == "torch" and last[:1].islower() and last not in NOT_TENSOR_FUNCTIONS:
                return TensorKind.OTHER
            if head == "torch.nn.functional":
                return TensorKind.OTHER
            return None
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value not in NOT_TENSOR_METHODS:
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

    def _parameter_mapping(self, expr: cst.BaseExpression) -> bool:
        """`dict(model.named_parameters())`, or a name bound once to it."""
        if isinstance(expr, cst.Name):
            entry = self.facts.values.scope(expr).assignment_before(expr.value, expr)
            if entry is None or not isinstance(entry[1], cst.Assign) or not isinstance(entry[1].targets[0].target, cst.Name):
                return False
            expr = entry[2]
        if not (isinstance(expr, cst.Call) and dotted(expr.func) == "dict" and len(expr.args) == 1):
            return False
        inner = expr.args[0].value
        return isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and inner.func.attr.value == "named_parameters"

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
                if name.value in target_names(ancestor.target):
                    return ancestor
        return None

    def _maybe_packed(self, expr: cst.CSTNode) -> bool:
        """A module's output in a function that packs sequences: maybe a PackedSequence."""
        return self.in_packing_scope(expr)

    def may_change_shape(self, value: cst.BaseExpression) -> bool:
        """Whether `value` (or the one value a name was bound to) is a tensor
        whose shape need not be its source's: a slice or index of a tensor
        (`w[:, :90]`), a selection (`torch.index_select`, `narrow`,
        `masked_select`), padding or concatenation, or a new tensor of a
        size given explicitly (`torch.randn(5, 2)`)."""
        if isinstance(value, cst.Name):
            entry = self.facts.values.scope(value).assignment_before(value.value, value)
            if entry is None or entry[2] is None or not isinstance(entry[1], cst.Assign):
                return False
            value = entry[2]
        if isinstance(value, cst.Subscript):
            return any(isinstance(element.slice, cst.Slice) for element in value.slice) or self.kind(value.value) is not None
        if not isinstance(value, cst.Call):
            return False
        qualified = self.facts.names.qualified(value.func) or ""
        name = qualified.rpartition(".")[2] if qualified else getattr(getattr(value.func, "attr", None), "value", "")
        if name in _SHAPE_CHANGING:
            return qualified.startswith("torch.") or (not qualified and self.kind(value.func.value) is not None)  # type: ignore[attr-defined]
        return qualified.count(".") == 1 and qualified.startswith("torch.") and name in SIZED_FACTORIES and bool(value.args)

    def is_scalar(self, expr: cst.BaseExpression, depth: int = 0) -> bool:
        """Whether `expr` is known to be a 0-dim tensor: what a loss function
        or criterion returns with its default reduction, a full reduction
        (`x.mean()`, `x.sum()`, `x.norm(2)`, `torch.sum(x)`), sums and products
        of those with numbers, a name bound to one, or a name `backward()` is
        called on with no `gradient` (torch requires a scalar there)."""
        if depth > 6:
            return False
        facts = self.facts
        if isinstance(expr, cst.BinaryOperation):
            sides = (expr.left, expr.right)
            known = [side for side in sides if not _is_number(side)]
            return bool(known) and all(self.is_scalar(side, depth + 1) for side in known)
        if isinstance(expr, cst.UnaryOperation):
            return self.is_scalar(expr.expression, depth + 1)
        if isinstance(expr, cst.Name):
            if self._backpropagated_as_scalar(expr):
                return True
            entry = facts.values.scope(expr).assignment_before(expr.value, expr)
            if entry is None or entry[2] is None or not isinstance(entry[1], (cst.Assign, cst.AugAssign, cst.AnnAssign)):
                return False
            if isinstance(entry[1], cst.Assign) and not all(isinstance(t.target, cst.Name) for t in entry[1].targets):
                return False
            if isinstance(entry[1], cst.AugAssign) and self.kind(entry[2]) is None and not self.is_scalar(entry[2], depth + 1):
                # `kld /= batch_size`: a scalar scaled by a number stays one.
                return self._scalar_before(entry[1], depth)
            return self.is_scalar(entry[2], depth + 1)
        if not isinstance(expr, cst.Call):
            return False
        functions = facts.values.file_functions(expr)
        if len(functions) == 1:
            # A loss helper of this file: scalar when every return is.
            returns = [r for r in facts.index.descendants(functions[0].body, cst.Return) if facts.index.scope_of(r) is functions[0]]
            return bool(returns) and all(r.value is not None and self.is_scalar(r.value, depth + 1) for r in returns)
        keywords = {arg.keyword.value: arg.value for arg in expr.args if arg.keyword is not None}
        reduction = keywords.get("reduction")
        if isinstance(reduction, cst.SimpleString) and reduction.evaluated_value == "none":
            return False
        if isinstance(keywords.get("reduce"), cst.Name) and keywords["reduce"].value == "False":
            return False
        positional = [arg for arg in expr.args if arg.keyword is None]
        qualified = facts.names.qualified(expr.func) or ""
        if qualified:
            last = qualified.rpartition(".")[2]
            if is_loss_function(qualified):
                return True
            return qualified.count(".") == 1 and last in _FULL_REDUCTIONS and len(positional) == 1 and "dim" not in keywords
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in _FULL_REDUCTIONS and "dim" not in keywords:
            if self.kind(func.value) is None and not facts.values.holds(func.value) & (GRAD | Holds.DETACHED):
                return False
            return not positional or (func.attr.value == "norm" and len(positional) == 1)
        return bool(facts.values.holds(func) & Holds.CRITERION) and bool(facts.values.holds(expr) & Holds.LOSS)

    def _scalar_before(self, augmented: cst.AugAssign, depth: int) -> bool:
        """Whether the name `augmented` updates held a scalar just before it."""
        target = augmented.target
        if not isinstance(target, cst.Name):
            return False
        entry = self.facts.values.scope(augmented).assignment_before(target.value, augmented)
        if entry is None or entry[2] is None or not isinstance(entry[1], (cst.Assign, cst.AnnAssign)):
            return False
        return self.is_scalar(entry[2], depth + 1)

    def _backpropagated_as_scalar(self, name: cst.Name) -> bool:
        """`name.backward()` with no `gradient`, in the same function."""
        for read in self.facts.values.scope(name).reads.get(name.value, ()):
            attribute = self.facts.index.parent(read)
            call = self.facts.index.parent(attribute) if isinstance(attribute, cst.Attribute) else None
            if isinstance(call, cst.Call) and call.func is attribute and attribute.attr.value == "backward":
                if not any(arg.keyword is None or arg.keyword.value == "gradient" for arg in call.args):
                    return True
        return False

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


def _is_number(expr: cst.BaseExpression) -> bool:
    """`2`, `0.5`, `-0.5`."""
    if isinstance(expr, cst.UnaryOperation):
        expr = expr.expression
    return isinstance(expr, (cst.Integer, cst.Float))


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


def _iterates_parameters(target: cst.BaseExpression, iterable: cst.BaseExpression, name: str) -> bool:
    """Whether the loop binds `name` to a parameter: `for p in model.parameters()`,
    `model.named_parameters()`, `group["params"]`, and `zip(...)` of them."""
    if isinstance(iterable, cst.Call) and dotted(iterable.func) == "zip" and isinstance(target, (cst.Tuple, cst.List)):
        return any(
            name in target_names(element.value) and _iterates_parameters(element.value, arg.value, name)
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
