"""Which names hold a view of another tensor.

A view shares its base's storage and is marked as a view by autograd,
whether or not anything requires grad: basic indexing of a tensor
(`x[0]`, `x[:, -1]`), view methods (`x.view(...)`, `x.t()`, `x.T`,
`x.unsqueeze(0)`, `x.expand(...)`), `reshape`/`flatten` (a view whenever the
strides allow it, as they do for any contiguous tensor), the pieces of
`split`/`chunk`/`unbind`, and the gradients `torch.autograd.grad` returns
(backward formulas may hand back a transposed view: `nn.Linear`'s weight
and bias gradients are views in torch 2.x). Checked against torch 2.x:
`x.detach_()` raises "Can't detach views in-place" on each of them.

`view_origin(name)` follows the name to the assignment that reaches it in
its function, through the returns of the file's own functions (also a
function stored on `self` in `__init__`: `self.to_matrix = to_matrix`).

Reached from rules as `facts.shared("views", Views)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, List, Optional, Set, Tuple

import libcst as cst

from detachlint.analysis.inplace import is_basic_index
from detachlint.analysis.names import dotted
from detachlint.analysis.values import GRAD, Holds
from detachlint.analysis.vocabulary import FACTORIES, SPLITTING_METHODS, VIEW_METHODS

if TYPE_CHECKING:  # pragma: no cover
    from detachlint.analysis import Facts

# Methods whose result is a view of the receiver (when the strides allow, for `reshape`/`flatten`).
_VIEW_RESULTS = (VIEW_METHODS - {"T", "mT"}) | {"reshape", "reshape_as", "flatten", "view_as_real", "view_as_complex"}
_MAX_DEPTH = 4


class Views:
    def __init__(self, facts: "Facts") -> None:
        self.facts = facts
        self.values = facts.values

    def view_origin(self, name: cst.Name, depth: int = 0) -> Optional[cst.CSTNode]:
        """The expression that makes the tensor `name` holds a view, or None."""
        if depth > _MAX_DEPTH:
            return None
        scope = self.values.scope(name)
        entry = scope.assignment_before(name.value, name)
        if entry is None:
            return None
        _, node, value, _ = entry
        if isinstance(node, cst.For):
            # `for g in torch.autograd.grad(...)`, `for part in x.chunk(4)`
            iterable = node.iter
            if isinstance(iterable, cst.Name):
                whole = self.tensor_iterated(node, iterable)
                if whole is not None:
                    return whole
                inner = scope.assignment_before(iterable.value, iterable)
                iterable = inner[2] if inner is not None and isinstance(inner[1], cst.Assign) else None
            return iterable if iterable is not None and self._pieces(iterable) else None
        if value is None or not isinstance(node, (cst.Assign, cst.AnnAssign)):
            return None
        if _unpacks(node, name.value) and not isinstance(getattr(node, "value", None), (cst.Tuple, cst.List)):
            return value if self._pieces(value) else None
        return self._view(value, depth)

    def _view(self, expr: cst.BaseExpression, depth: int) -> Optional[cst.CSTNode]:
        if isinstance(expr, cst.Attribute) and expr.attr.value in ("T", "mT", "H", "mH", "real", "imag"):
            return expr
        if isinstance(expr, cst.Subscript):
            if self._pieces(expr.value):
                return expr  # `torch.autograd.grad(loss, w)[0]`, `x.chunk(2)[1]`
            sliced = len(expr.slice) > 1 or isinstance(expr.slice[0].slice, cst.Slice)
            if sliced and is_basic_index(expr) and self.values.holds(expr.value) & (GRAD | Holds.DETACHED):
                # `out[:, -1]` of a tensor; `outputs[0]` may be an element of a tuple
                return expr
            return None
        if not isinstance(expr, cst.Call):
            return None
        func = expr.func
        if isinstance(func, cst.Attribute) and func.attr.value in _VIEW_RESULTS and self.facts.names.qualified(func) is None:
            return expr
        functions = self.values.file_functions(expr)
        if len(functions) != 1 or depth >= _MAX_DEPTH:
            return None
        index = self.facts.index
        returns = [r for r in index.descendants(functions[0].body, cst.Return) if index.scope_of(r) is functions[0]]
        if not returns or any(r.value is None for r in returns):
            return None
        origins = [self._returned_view(r.value, depth + 1) for r in returns]
        return origins[0] if all(origins) else None

    def tensor_iterated(self, loop: cst.For, iterable: cst.Name) -> Optional[cst.CSTNode]:
        """`for s in state:` where an assignment reaching `state` (also from
        the loop's previous pass, and through a call that hands the state
        back, `y, state = net.rnn(x, state)`) gives one tensor rather than a tuple of
        them: a torch factory, or a function of the file that returns one
        on some path (`begin_state()` returning `torch.zeros(...)` for a GRU
        and an `(h, c)` tuple for an LSTM). Iterating a tensor yields its
        rows, which are views. The tensor-making expression, or None; None
        too when a test around the loop checks the name's type
        (`isinstance(state, tuple)`): the author told the two apart."""
        index = self.facts.index
        for ancestor in index.ancestors(loop):
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda)):
                break
            if isinstance(ancestor, (cst.If, cst.While)) and any(
                isinstance(call.func, cst.Name) and call.func.value == "isinstance"
                and call.args and isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == iterable.value
                for call in index.descendants(ancestor.test, cst.Call)
            ):
                return None
        scope = self.values.scope(iterable)
        reads, seen = [iterable], set()
        while reads:
            read = reads.pop()
            for binding, value in (*scope.reaching(read), *scope.loop_carried(read)):
                if binding in seen or not isinstance(value, cst.Call):
                    continue
                seen.add(binding)
                if self._single_tensor(value):
                    return value
                # `y, state = net.rnn(x, state)`: the state comes back in the
                # shape it went in, so what reaches the argument counts too.
                reads += [a.value for a in value.args if isinstance(a.value, cst.Name) and a.value.value == iterable.value]
        return None

    def held_view(self, loop: cst.For) -> Optional[Tuple[cst.Attribute, cst.CSTNode]]:
        """`for h in self._all:` in a method, where `self._all` (an attribute,
        or a property, of the class, of a base or of a subclass in the file)
        holds `self.input_feed`, which a method of theirs sets to a view
        (`....unsqueeze(0)`): that element and the view-making expression."""
        if not _self_attribute(loop.iter, self.facts.index):
            return None
        klass = next((a for a in self.facts.index.ancestors(loop) if isinstance(a, cst.ClassDef)), None)
        if klass is None:
            return None
        family = self._family(klass)
        seen: Set[str] = set()
        pending = [loop.iter]
        while pending:
            held = pending.pop()
            if held.attr.value in seen or len(seen) > 8:
                continue
            seen.add(held.attr.value)
            for value in _held_values(family, held.attr.value, self.facts.index):
                for element in _elements(value):
                    if _self_attribute(element, self.facts.index):
                        pending.append(element)
                        for assigned in _held_values(family, element.attr.value, self.facts.index):
                            view = self._view(assigned, 0)
                            if view is not None:
                                return element, view
        return None

    def _family(self, klass: cst.ClassDef) -> List[cst.ClassDef]:
        """`klass` with the file's classes it derives from or that derive from it."""
        classes = {c.name.value: c for c in self.facts.index.nodes(cst.ClassDef)}
        bases = {name: {dotted(b.value) for b in c.bases} & set(classes) for name, c in classes.items()}
        family = {klass.name.value}
        while True:
            grown = family | {name for name in classes if bases[name] & family}
            grown |= {base for name in family for base in bases[name]}
            if grown == family:
                return [classes[name] for name in family]
            family = grown

    def _single_tensor(self, call: cst.Call, depth: int = 0) -> bool:
        """A torch factory call, or a call of a file function with a
        `return` of one (or of a name bound to one)."""
        qualified = self.facts.names.qualified(call.func) or ""
        if qualified.startswith("torch.") and qualified.count(".") == 1 and qualified.rsplit(".", 1)[-1] in FACTORIES:
            return True
        if depth >= 2 or qualified:
            return False
        index = self.facts.index
        functions = self.values.file_functions(call) or self.facts.intent.methods_called(call)
        for function in functions[:1] if len(functions) == 1 else ():
            for returned in index.descendants(function.body, cst.Return):
                if index.scope_of(returned) is function and isinstance(returned.value, cst.Call):
                    if self._single_tensor(returned.value, depth + 1):
                        return True
        return False

    def _returned_view(self, value: cst.BaseExpression, depth: int) -> Optional[cst.CSTNode]:
        if isinstance(value, cst.Name):
            return self.view_origin(value, depth)
        return self._view(value, depth)

    def _pieces(self, expr: cst.BaseExpression) -> bool:
        """A call returning a tuple of views: `x.chunk(2)`, `torch.unbind(x)`,
        `torch.autograd.grad(loss, params)`."""
        if not isinstance(expr, cst.Call):
            return False
        qualified = self.facts.names.qualified(expr.func)
        if qualified is not None:
            return qualified == "torch.autograd.grad" or (
                qualified.startswith("torch.") and qualified.count(".") == 1 and qualified.rsplit(".", 1)[-1] in SPLITTING_METHODS
            )
        return isinstance(expr.func, cst.Attribute) and expr.func.attr.value in SPLITTING_METHODS


def _unpacks(node: cst.CSTNode, name: str) -> bool:
    """`a, b = ...`: `node` binds `name` as an element of an unpacked tuple."""
    targets = node.targets if isinstance(node, cst.Assign) else []
    for target in targets:
        if isinstance(target.target, (cst.Tuple, cst.List)):
            for element in target.target.elements:
                if isinstance(element.value, cst.Name) and element.value.value == name:
                    return True
    return False


def _self_attribute(expr: cst.CSTNode, index) -> bool:
    return isinstance(expr, cst.Attribute) and index.is_receiver(expr.value)


def _held_values(classes, name: str, index) -> Iterator[cst.BaseExpression]:
    """What `self.<name>` holds in `classes`: the values assigned to it in
    their methods, and the returns of a property of that name."""
    for klass in classes:
        for statement in klass.body.body:
            if not isinstance(statement, cst.FunctionDef):
                continue
            if statement.name.value == name:
                for node in _walk(statement.body):
                    if isinstance(node, cst.Return) and node.value is not None:
                        yield node.value
                continue
            for node in _walk(statement.body):
                if isinstance(node, cst.Assign) and any(
                    _self_attribute(t.target, index) and t.target.attr.value == name for t in node.targets
                ):
                    yield node.value


def _elements(value: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The parts of `a + (b, c)` and of tuple and list displays; the value itself otherwise."""
    if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, cst.Add):
        yield from _elements(value.left)
        yield from _elements(value.right)
    elif isinstance(value, (cst.Tuple, cst.List)):
        for element in value.elements:
            yield from _elements(element.value)
    else:
        yield value


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """The nodes under `node`, not entering nested functions or classes."""
    for child in node.children:
        yield child
        if not isinstance(child, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            yield from _walk(child)
