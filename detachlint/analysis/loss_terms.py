"""Loss terms that carry no graph.

A prediction loses its graph when it is detached (`out.detach()`,
`out.data`) or computed with autograd off. A loss term built from such a
prediction and from plain data only (batches, targets, numbers, torch math
on those) is a constant to autograd: backpropagating it sends no gradient
to the model, and raises if nothing else in the loss requires grad.

This module answers, for a graphless prediction:

- `term(seed)`: the largest expression around it built from it and plain
  data only (`criterion(out.detach(), y)`, `((pred - y) ** 2).mean()`);
- `is_loss_shaped(term, seed)`: whether that expression compares the
  prediction with something (a loss call, or a difference with a target);
- `backward_through_sum(term)`: the backward call the term reaches as a
  summand of the loss (`loss = a + term; loss.backward()`), not as a
  weight or a mask, which is a deliberate stop-gradient.

Reached from rules as `facts.shared("loss_terms", LossTerms)`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, List, Optional, Set

import libcst as cst

from detachlint.analysis.names import dotted, string_key, string_value, unpacked_position
from detachlint.analysis.values import _FUNCTIONAL_LOSS, GRAD, Holds
from detachlint.analysis.vocabulary import (
    BACKWARD_METHODS,
    CONVERSIONS,
    COPYING_METHODS,
    DETACHING_METHODS,
    MODULE_RETURNING_SELF,
    NO_GRAPH_METHODS,
    NUMBER_BUILTINS,
)
from detachlint.analysis.priors import DATA_ITERABLE_NAME, DATA_NAME

if TYPE_CHECKING:  # pragma: no cover
    from detachlint.analysis import Facts

# Methods that end in a number, or a tensor with no graph: a term stops there.
_ENDS_TERM = NO_GRAPH_METHODS | {"detach_", "backward"}
_REDUCTIONS = {"mean", "sum"}
# Builtins whose result is a plain number or a range of them.
_PLAIN_BUILTINS = NUMBER_BUILTINS | {"range"}
# Methods whose arguments are devices, dtypes and shapes, never a graph.
_SHAPE_METHODS = CONVERSIONS | {"long", "int", "bool", "expand", "repeat"}
_MAX_DEPTH = 8


class LossTerms:
    def __init__(self, facts: "Facts") -> None:
        self.facts = facts
        self.index = facts.index
        self.values = facts.values
        self._frozen_objects: Optional[Set[str]] = None

    # Plain data ------------------------------------------------------------

    def is_plain(self, expr: cst.CSTNode, depth: int = 0) -> bool:
        """True when `expr` is known to be data without a graph: numbers,
        strings, a batch from a data loader, a parameter named like data,
        `.detach()`/`.data`, and torch math or methods over those."""
        if depth > _MAX_DEPTH:
            return False
        if self.facts.interpreter.known_without_graph(expr):
            return True
        again = lambda inner: self.is_plain(inner, depth + 1)  # noqa: E731
        if isinstance(expr, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
            return True
        if isinstance(expr, cst.Name):
            return expr.value in ("True", "False", "None") or self._plain_name(expr, depth)
        if isinstance(expr, cst.Attribute) and _is_library_constant(self.facts.names.qualified(expr)):
            return True  # `torch.float32`, `np.pi`: a dtype or a constant
        if isinstance(expr, cst.Attribute):
            if expr.attr.value == "data":
                return not self.values.holds(expr.value) & Holds.PACKED
            return not self.index.is_receiver(expr.value) and again(expr.value)
        if isinstance(expr, cst.Subscript):
            return again(expr.value)
        if isinstance(expr, cst.UnaryOperation):
            return again(expr.expression)
        if isinstance(expr, cst.BinaryOperation):
            return again(expr.left) and again(expr.right)
        if isinstance(expr, (cst.Tuple, cst.List)):
            return all(again(element.value) for element in expr.elements)
        if isinstance(expr, cst.Call):
            return self._plain_call(expr, depth)
        return False

    def _plain_call(self, call: cst.Call, depth: int) -> bool:
        args = [arg.value for arg in call.args]
        func = call.func
        qualified = self.facts.names.qualified(func)
        if qualified is None and isinstance(func, cst.Attribute):
            if func.attr.value in DETACHING_METHODS:
                return True
            if func.attr.value == "requires_grad_":
                return False
            # A method of plain data (`y.to(device)`, `batch.get("labels")`);
            # the arguments of a conversion are devices, dtypes and shapes.
            if not self.is_plain(func.value, depth + 1):
                return False
            return func.attr.value in _SHAPE_METHODS or all(self.is_plain(a, depth + 1) for a in args)
        if qualified is not None and qualified.startswith("torch."):
            if self.facts.modules.is_module_constructor(call) or self.facts.modules.is_loss_constructor(call):
                return False
            if any(arg.keyword is not None and arg.keyword.value == "requires_grad" for arg in call.args):
                return False
            return all(self.is_plain(a, depth + 1) for a in args)
        if isinstance(func, cst.Name) and func.value in _PLAIN_BUILTINS:
            return True
        return False

    def _plain_name(self, name: cst.Name, depth: int) -> bool:
        values = self.values
        if values.holds(name) & (GRAD | Holds.MODEL):
            return False
        scope = values.scope(name)
        entry = scope.assignment_before(name.value, name)
        if entry is None:
            if name.value in scope.params:
                return bool(DATA_NAME.fullmatch(name.value))
            return False
        _, node, value, _ = entry
        if isinstance(node, cst.For):
            return self._data_loop(node)
        if value is None or isinstance(node, cst.AugAssign):
            return False
        return self.is_plain(value, depth + 1)

    def _data_loop(self, loop: cst.For) -> bool:
        """`for x, y in loader`, `for i, batch in enumerate(tqdm(dataloader))`."""
        iterable = loop.iter
        while isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and iterable.args:
            if iterable.func.value not in ("enumerate", "tqdm", "iter", "zip"):
                break
            iterable = iterable.args[0].value
        if isinstance(iterable, cst.Call):
            iterable = iterable.func
        name = dotted(iterable)
        return bool(name and DATA_ITERABLE_NAME.search(name.rsplit(".", 1)[-1]))

    # Graphless predictions -------------------------------------------------

    def detached_prediction(self, node: cst.CSTNode) -> Optional[cst.BaseExpression]:
        """`out` when `node` is `out.detach()` or `out.data` and `out` is a
        model output (an activation with a graph); None otherwise."""
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute):
            if node.func.attr.value != "detach" or node.args:
                return None
            inner = node.func.value
        elif isinstance(node, cst.Attribute) and node.attr.value == "data":
            inner = node.value
        else:
            return None
        return inner if self.values.holds(inner) & Holds.ACTIVATION else None

    def is_detached_loss(self, node: cst.CSTNode, prediction: cst.BaseExpression) -> bool:
        """`criterion(out, y).detach()`: what was detached is itself a loss,
        so whatever it is summed into gets no gradient from it. Not the
        straight-through offset `loss - loss.detach()`, whose live side is
        the same loss."""
        if not self.values.holds(prediction) & Holds.LOSS:
            return False
        node = self.climb_conversions(node)
        root = node
        while isinstance(self.index.parent(root), cst.BinaryOperation) and isinstance(
            self.index.parent(root).operator, (cst.Add, cst.Subtract)
        ):
            root = self.index.parent(root)
        return not self._straight_through(root)

    def _straight_through(self, total: cst.CSTNode) -> bool:
        """A sum holding some `x` next to its own `x.detach()`
        (`hard.detach() + soft - soft.detach()`): a value swapped under a
        gradient on purpose, every detached summand included."""
        code = self.facts.module.code_for_node
        summands: List[cst.CSTNode] = []
        frontier = [total]
        while frontier:
            node = frontier.pop()
            if isinstance(node, cst.BinaryOperation) and isinstance(node.operator, (cst.Add, cst.Subtract)):
                frontier.extend((node.left, node.right))
            else:
                summands.append(node)
        live = {code(s).strip() for s in summands}
        for summand in summands:
            if isinstance(summand, cst.Call) and isinstance(summand.func, cst.Attribute):
                if summand.func.attr.value == "detach" and code(summand.func.value).strip() in live:
                    return True
        return False

    def uses(self, seed: cst.CSTNode) -> Iterator[cst.CSTNode]:
        """Where the graphless value `seed` is used: `seed` itself, or, when
        it is assigned to a name (`pred = out.detach().cpu()`), each later
        read of that name that still sees this assignment."""
        node = self.climb_conversions(seed)
        parent = self.index.parent(node)
        if not isinstance(parent, cst.Assign) or len(parent.targets) != 1:
            yield node
            return
        target = parent.targets[0].target
        if not isinstance(target, cst.Name):
            return
        yield from self.reads_of(target.value, parent)

    def reads_of(self, name: str, assignment: cst.CSTNode) -> Iterator[cst.Name]:
        """Reads of `name` after `assignment` that still see it."""
        scope = self.values.scope(assignment)
        for read in scope.reads_after(name, assignment):
            entry = scope.assignment_before(name, read)
            if entry is not None and entry[1] is assignment:
                yield read

    def climb_conversions(self, node: cst.CSTNode) -> cst.CSTNode:
        """`out.detach()` -> `out.detach().cpu().float()`."""
        while True:
            parent = self.index.parent(node)
            call = self.index.parent(parent) if isinstance(parent, cst.Attribute) else None
            if not (isinstance(call, cst.Call) and call.func is parent and parent.value is node):
                return node
            if parent.attr.value not in COPYING_METHODS:
                return node
            node = call

    # Terms -----------------------------------------------------------------

    def term(self, use: cst.CSTNode) -> cst.CSTNode:
        """The largest expression around `use` built from it and plain data only."""
        node = use
        for _ in range(2 * _MAX_DEPTH):
            grown = self._grow(node)
            if grown is None:
                return node
            node = grown
        return node

    def _grow(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        index = self.index
        parent = index.parent(node)
        if isinstance(parent, cst.UnaryOperation):
            return parent
        if isinstance(parent, cst.Subscript) and parent.value is node:
            return parent
        if isinstance(parent, cst.BinaryOperation):
            other = parent.right if parent.left is node else parent.left
            return parent if self.is_plain(other) else None
        if isinstance(parent, cst.Attribute) and parent.value is node:
            call = index.parent(parent)
            if not isinstance(call, cst.Call) or call.func is not parent or parent.attr.value in _ENDS_TERM:
                return None
            return call if all(self.is_plain(arg.value) for arg in call.args) else None
        if isinstance(parent, cst.Arg) and parent.value is node:
            call = index.parent(parent)
            if not isinstance(call, cst.Call) or not (self.is_loss_call(call) or self._torch_function(call)):
                return None
            others = (arg.value for arg in call.args if arg is not parent)
            return call if all(self.is_plain(other) for other in others) else None
        return None

    def _torch_function(self, call: cst.Call) -> bool:
        qualified = self.facts.names.qualified(call.func) or ""
        return qualified.startswith("torch.") and not self.facts.modules.is_module_constructor(call)

    def is_loss_call(self, call: cst.Call) -> bool:
        """`F.mse_loss(...)`, `criterion(...)`, `nn.MSELoss()(...)`, `loss_fn.forward(...)`."""
        func = call.func
        qualified = self.facts.names.qualified(func)
        if qualified is not None:
            return bool(_FUNCTIONAL_LOSS.fullmatch(qualified))
        if isinstance(func, cst.Attribute) and func.attr.value == "forward":
            func = func.value
        if isinstance(func, cst.Call):
            return self.facts.modules.is_loss_constructor(func)
        return bool(self.values.holds(func) & Holds.CRITERION) or self._parameterless_loss_function(func)

    def _parameterless_loss_function(self, func: cst.BaseExpression) -> bool:
        """`memory.memory_loss(...)`, `kd_loss(...)`: a function named as a
        loss whose every definition in this file is a plain function or a
        method of a class that is not an `nn.Module`: it has no parameters
        of its own, so its result has a graph only through its arguments."""
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
        if "loss" not in name.lower() or self.values.holds(func) & Holds.MODEL:
            return False
        definitions = self.facts.intent.functions_named(name)
        return bool(definitions) and all(self.facts.modules.class_of(d) is None for d in definitions)

    def is_loss_shaped(self, term: cst.CSTNode, use: cst.CSTNode) -> bool:
        """The term compares the prediction with something: `use` is an
        argument of a loss call in it, or one side of a difference whose
        other side is data (not a number) and which is then reduced."""
        if term is use:
            return False
        index = self.index
        subtracted = False
        for ancestor in index.ancestors(use):
            if isinstance(ancestor, cst.Call) and self.is_loss_call(ancestor):
                return True
            if isinstance(ancestor, cst.BinaryOperation) and isinstance(ancestor.operator, cst.Subtract):
                other = ancestor.right if index.is_inside(use, ancestor.left) else ancestor.left
                subtracted = subtracted or not isinstance(other, (cst.Integer, cst.Float))
            if subtracted and _is_reduction(ancestor, self.facts):
                return True
            if ancestor is term:
                return False
        return False

    # Summands of a loss -----------------------------------------------------

    def summands(self, expr: cst.BaseExpression) -> List["Summand"]:
        """The terms a backpropagated loss adds up, each with what the
        parameters of the function it sits in are bound to: through `+`/`-`,
        weights (`self.beta * kl`), `.mean()`/`.sum()`, names (`loss = ce +
        kl`), `sum(d.values())` and `d["kl"] = ...` stores, the entries of a
        dict a helper returns (`losses["kl"]`), and the return of a function
        of the file that builds the loss (`loss, logs = self.compute_loss(x)`)."""
        found: List[Summand] = []
        self._summands(expr, {}, found, set(), 0)
        return found

    def _summands(self, expr: cst.CSTNode, bound: dict, found: List["Summand"], seen: Set[cst.CSTNode], depth: int) -> None:
        if depth > 2 * _MAX_DEPTH or len(found) > 64:
            return
        again = lambda inner, b=bound: self._summands(inner, b, found, seen, depth + 1)  # noqa: E731
        if isinstance(expr, cst.BinaryOperation):
            operator = expr.operator
            if isinstance(operator, (cst.Add, cst.Subtract)):
                again(expr.left)
                again(expr.right)
                return
            if isinstance(operator, (cst.Multiply, cst.Divide)):
                if self._scale(expr.right):
                    again(expr.left)
                    return
                if isinstance(operator, cst.Multiply) and self._scale(expr.left):
                    again(expr.right)
                    return
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
            again(expr.expression)
            return
        if isinstance(expr, cst.Call):
            func = expr.func
            if isinstance(func, cst.Attribute) and func.attr.value in _REDUCTIONS and not expr.args and self.facts.names.qualified(func) is None:
                again(func.value)
                return
            if isinstance(func, cst.Name) and func.value == "sum" and not self.values.defines("sum") and len(expr.args) == 1:
                inner = expr.args[0].value
                if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) and inner.func.attr.value == "values":
                    for value, entry_bound in self.dict_entries(inner.func.value, None, bound):
                        again(value, entry_bound)
                    return
                if isinstance(inner, (cst.List, cst.Tuple)):
                    for element in inner.elements:
                        again(element.value)
                    return
            returned = self._returned_loss(expr, None, bound)
            if returned is not None:
                callee_bound, values = returned
                for value in values:
                    again(value, callee_bound)
                return
        if isinstance(expr, cst.Subscript) and string_key(expr) is not None:
            entries = self.dict_entries(expr.value, string_key(expr), bound)
            if entries:
                for value, entry_bound in entries:
                    again(value, entry_bound)
                return
        if isinstance(expr, cst.Name) and expr not in seen:
            seen.add(expr)
            reaching = self.values.scope(expr).reaching(expr)
            if reaching and all(value is not None for _, value in reaching):
                for binding, value in reaching:
                    position = unpacked_position(binding, expr.value)
                    if position is None:
                        again(value)
                        continue
                    returned = self._returned_loss(value, position, bound) if isinstance(value, cst.Call) else None
                    if returned is None:
                        found.append(Summand(expr, bound))
                    else:
                        for element in returned[1]:
                            again(element, returned[0])
                return
        found.append(Summand(expr, bound))

    def dict_entries(self, container: cst.BaseExpression, key: Optional[str], bound: dict, depth: int = 0) -> List[tuple]:
        """(value, bound) for each value a dict holds (under `key`, or all):
        the entries of the dict literal `container` is bound to, or that a
        function of the file returns (as a literal or as a name it fills),
        and the `container[k] = v` stores of its scope."""
        if not isinstance(container, cst.Name) or depth > 4:
            return []
        found: List[tuple] = []
        reaching = self.values.scope(container).reaching(container)
        if not reaching and container.value in bound:
            # A parameter: the dict the caller passed.
            return self.dict_entries(bound[container.value], key, bound.get(OUTER) or {}, depth + 1)
        for binding, value in reaching:
            if isinstance(value, cst.Dict):
                found += [(v, bound) for v in _literal_entries(value, key)]
            elif isinstance(value, cst.Call) and unpacked_position(binding, container.value) is None:
                functions = self.functions_run(value)
                if len(functions) != 1:
                    continue
                callee_bound = arguments_of(functions[0], value, bound, self.index)
                for returned in self.index.descendants(functions[0].body, cst.Return):
                    if self.index.scope_of(returned) is not functions[0]:
                        continue
                    if isinstance(returned.value, cst.Dict):
                        found += [(v, callee_bound) for v in _literal_entries(returned.value, key)]
                    elif isinstance(returned.value, cst.Name):
                        found += self.dict_entries(returned.value, key, callee_bound, depth + 1)
        for assign in self.index.descendants(self.index.scope_of(container), cst.Assign):
            for target in assign.targets:
                t = target.target
                if isinstance(t, cst.Subscript) and isinstance(t.value, cst.Name) and t.value.value == container.value:
                    if key is None or string_key(t) == key:
                        found.append((assign.value, bound))
        return found

    def functions_run(self, call: cst.Call) -> List[cst.FunctionDef]:
        """The functions of the file `call` runs: as `values.file_functions`
        and `intent.methods_called` resolve them, the `forward` of a block of
        a member `nn.ModuleList`, and the `__call__`/`forward` of the class
        whose instance every call of the file passes for a parameter
        (`criterion(out, y)` in `def train_step(net, criterion, ...)` called
        as `train_step(net, AllLosses(w), ...)`)."""
        functions = self.values.file_functions(call) or self.facts.intent.methods_called(call)
        if functions:
            return functions
        forward = self.values.forward_called(call)
        if forward is not None:
            return [forward]
        klass = self.passed_class(call.func)
        if klass is None:
            return []
        methods = {f.name.value: f for f in klass.body.body if isinstance(f, cst.FunctionDef)}
        found = methods.get("forward") if self.facts.modules.class_of(klass.body) is not None else None
        found = found or methods.get("__call__")
        return [found] if found is not None else []

    def frozen_objects(self) -> Set[str]:
        """Plain names the file freezes whole: `encoder.requires_grad_(False)`
        (also after `.eval()`), `for p in encoder.parameters(): p.requires_grad = False`."""
        if self._frozen_objects is None:
            found: Set[str] = set()
            for call in self.index.nodes(cst.Call):
                func = call.func
                if isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_" and call.args:
                    if dotted(call.args[0].value) == "False":
                        receiver = func.value
                        while isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute):
                            receiver = receiver.func.value
                        if isinstance(receiver, cst.Name):
                            found.add(receiver.value)
            for loop in self.index.nodes(cst.For):
                source = loop.iter
                if not (isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute) and source.func.attr.value == "parameters"):
                    continue
                if not isinstance(source.func.value, cst.Name) or not isinstance(loop.target, cst.Name):
                    continue
                for assign in self.index.descendants(loop.body, cst.Assign):
                    t = assign.targets[0].target
                    if isinstance(t, cst.Attribute) and t.attr.value == "requires_grad" and dotted(t.value) == loop.target.value:
                        if dotted(assign.value) == "False":
                            found.add(source.func.value.value)
            self._frozen_objects = found
        return self._frozen_objects

    def passed_class(self, expr: cst.BaseExpression, depth: int = 0) -> Optional[cst.ClassDef]:
        """The class of the file whose instance a parameter `expr` always
        receives: every call of its function passes `Cls(...)`, a name
        bound once to `Cls(...)` (or `Cls(...).eval()`), or a parameter of
        its own that receives one."""
        if not isinstance(expr, cst.Name) or depth > 3:
            return None
        function = self.index.scope_of(expr)
        if not isinstance(function, cst.FunctionDef) or expr.value not in self.values.scope(function).params:
            return None
        if self.values.scope(function).assignment_before(expr.value, expr) is not None:
            return None
        param = next((p for p in function.params.params if p.name.value == expr.value), None)
        if param is None:
            return None
        classes = set()
        arguments = self.values.arguments_for(param)
        for argument in arguments:
            if isinstance(argument, cst.Name) and not self.values.scope(argument).reaching(argument):
                handed_on = self.passed_class(argument, depth + 1)
                if handed_on is None:
                    return None
                classes.add(handed_on.name.value)
                continue
            for _ in range(2):
                if isinstance(argument, cst.Name):
                    reaching = self.values.scope(argument).reaching(argument)
                    if len(reaching) != 1 or reaching[0][1] is None:
                        return None
                    argument = reaching[0][1]
            while isinstance(argument, cst.Call) and isinstance(argument.func, cst.Attribute) and argument.func.attr.value in MODULE_RETURNING_SELF:
                argument = argument.func.value
            if not (isinstance(argument, cst.Call) and isinstance(argument.func, cst.Name)):
                return None
            classes.add(argument.func.value)
        if len(classes) != 1:
            return None
        name = classes.pop()
        found = [c for c in self.index.nodes(cst.ClassDef) if c.name.value == name]
        return found[0] if len(found) == 1 else None

    def _returned_loss(self, call: cst.Call, position: Optional[int], outer: Optional[dict] = None):
        """(parameters bound to the call's arguments, returned values) for a
        call of one function of the file whose return builds a loss from
        more than one term, at `position` of a returned tuple."""
        functions = self.functions_run(call)
        if len(functions) != 1:
            return None
        function = functions[0]
        values = []
        for returned in self.index.descendants(function.body, cst.Return):
            value = returned.value
            if value is None or self.index.scope_of(returned) is not function:
                continue
            if position is not None:
                if not isinstance(value, cst.Tuple) or position >= len(value.elements):
                    return None
                value = value.elements[position].value
            values.append(value)
        bound = arguments_of(function, call, outer, self.index)
        if not values:
            return None
        if position is None and not all(self._sums(v) for v in values):
            return None  # `Huber_Loss(pred, target)`: one term, kept whole
        return bound, values

    def _sums(self, value: cst.CSTNode, depth: int = 0) -> bool:
        """Whether `value` adds terms up (`a + b`, `sum(d.values())`), also
        through the one name it is bound to (`loss = loss + kl; return loss`)
        and a call of the file's function that returns such a sum
        (`return self.criterion(out, y, ...)`)."""
        if isinstance(value, cst.BinaryOperation) and isinstance(value.operator, (cst.Add, cst.Subtract)):
            return True
        if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "sum":
            return True
        if depth >= 2:
            return False
        if isinstance(value, cst.Name):
            reaching = self.values.scope(value).reaching(value)
            return bool(reaching) and all(
                v is not None and unpacked_position(b, value.value) is None and self._sums(v, depth + 1) for b, v in reaching
            )
        if isinstance(value, cst.Call):
            functions = self.functions_run(value)
            if len(functions) != 1:
                return False
            returns = [r.value for r in self.index.descendants(functions[0].body, cst.Return) if self.index.scope_of(r) is functions[0]]
            return bool(returns) and all(r is not None and self._sums(r, depth + 1) for r in returns)
        return False

    # Reaching backward -----------------------------------------------------

    def backward_through_sum(self, term: cst.CSTNode) -> Optional[cst.Call]:
        """The backward call that `term` reaches as a summand of the loss,
        through assignments (`loss = ce + term`, `loss += term`) in its scope."""
        seen: Set[cst.CSTNode] = set()
        frontier: List[cst.CSTNode] = [term]
        while frontier and len(seen) < 32:
            node = self._climb_sum(frontier.pop())
            if node in seen:
                continue
            seen.add(node)
            backward = self._backward_of(node)
            if backward is not None:
                return backward
            statement = self.index.parent(node)
            name = _summed_into(statement, node)
            if name is None:
                continue
            frontier.extend(self.reads_of(name, statement))
            # `loss = ce + term` followed by `loss += other`: still the same sum.
            for later in self._later_augmented(name, statement):
                frontier.extend(self.reads_of(name, later))
        return None

    def _climb_sum(self, node: cst.CSTNode) -> cst.CSTNode:
        index = self.index
        while True:
            parent = index.parent(node)
            if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, (cst.Add, cst.Subtract)):
                node = parent
            elif isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, (cst.Multiply, cst.Divide)):
                other = parent.right if parent.left is node else parent.left
                if parent.right is node and isinstance(parent.operator, cst.Divide):
                    return node
                if not self._scale(other):
                    return node
                node = parent
            elif isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Minus):
                node = parent
            elif isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in _REDUCTIONS:
                call = index.parent(parent)
                if not isinstance(call, cst.Call) or call.func is not parent:
                    return node
                node = call
            else:
                return node

    def _scale(self, expr: cst.BaseExpression) -> bool:
        """A loss weight: a number, a hyperparameter (`self.beta`, a
        function parameter) or plain data; not a tensor with a graph."""
        if isinstance(expr, (cst.Integer, cst.Float)):
            return True
        if isinstance(expr, cst.Attribute) and self.index.is_receiver(expr.value):
            return not self.values.holds(expr) & (GRAD | Holds.MODEL)
        if isinstance(expr, cst.Name) and expr.value in self.values.scope(expr).params:
            return not self.values.holds(expr) & (GRAD | Holds.MODEL)
        if self._setting(expr):
            return not self.values.holds(expr) & (GRAD | Holds.MODEL)
        return self.is_plain(expr)

    def _setting(self, expr: cst.BaseExpression) -> bool:
        """A configuration lookup: `args.beta`, `opt["lambda_adv"]`,
        `cfg.loss.w`, `Config.D_WEIGHT`: attributes and string keys of a
        function parameter or of a name this function never assigns."""
        chain = expr
        while isinstance(chain, (cst.Attribute, cst.Subscript)):
            if isinstance(chain, cst.Subscript):
                keys = [element.slice for element in chain.slice]
                if not all(isinstance(k, cst.Index) and isinstance(k.value, cst.SimpleString) for k in keys):
                    return False
            chain = chain.value
        if chain is expr or not isinstance(chain, cst.Name) or self.index.is_receiver(chain):
            return False
        scope = self.values.scope(chain)
        if chain.value in scope.params:
            return not self.values.holds(chain) & (GRAD | Holds.MODEL)
        return scope.assignment_before(chain.value, chain) is None and not chain.value in scope.assignments

    def _backward_of(self, node: cst.CSTNode) -> Optional[cst.Call]:
        index = self.index
        parent = index.parent(node)
        # `scaler.scale(loss).backward()`
        if isinstance(parent, cst.Arg) and parent.value is node:
            call = index.parent(parent)
            if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.args[0] is parent:
                if call.func.attr.value == "scale":
                    return self._backward_of(call)
                # `accelerator.backward(loss)`, `self.manual_backward(loss)`
                if call.func.attr.value in BACKWARD_METHODS and not self.values.holds(call.func.value) & GRAD:
                    return call
            if isinstance(call, cst.Call) and self.values.backward_target(call) is node:
                return call
            return None
        if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value == "backward":
            call = index.parent(parent)
            if isinstance(call, cst.Call) and call.func is parent:
                return call
        return None

    def _later_augmented(self, name: str, statement: cst.CSTNode) -> Iterator[cst.AugAssign]:
        scope = self.values.scope(statement)
        start = self.index.order[statement]
        for order, node, _, _ in scope.assignments.get(name, ()):
            if order <= start:
                continue
            if not (isinstance(node, cst.AugAssign) and isinstance(node.operator, (cst.AddAssign, cst.SubtractAssign))):
                return
            yield node


class Summand:
    """One term of a loss: the expression, and what the parameters of the
    function it sits in stand for at the call that built the loss."""

    __slots__ = ("expr", "bound")

    def __init__(self, expr: cst.CSTNode, bound: dict) -> None:
        self.expr = expr
        self.bound = bound


OUTER = "<outer>"  # in a `bound` dict: the caller's own `bound`, for its parameters


def arguments_of(function: cst.FunctionDef, call: cst.Call, outer: Optional[dict], index) -> dict:
    """`function`'s parameter names, each to the argument `call` passes
    (after `self` of a method run on an instance) or else to its default,
    and under `OUTER` what the caller's own parameters were bound to (`outer`)."""
    params = [p.name.value for p in function.params.params]
    if params and params[0] == index.instance_param(function):
        func = call.func
        # `Class.method(obj, x)` passes `self` itself; `obj.method(x)`, `crit(x)` do not.
        if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value[:1].isupper()):
            params = params[1:]
    found: dict = {OUTER: outer} if outer else {}
    for position, arg in enumerate(call.args):
        if arg.star:
            break
        name = arg.keyword.value if arg.keyword is not None else (params[position] if position < len(params) else None)
        if name is not None:
            found[name] = arg.value
    for param in (*function.params.params, *function.params.kwonly_params):
        if param.default is not None and param.name.value not in found:
            found[param.name.value] = param.default  # not passed: the default it takes
    return found


def _literal_entries(literal: cst.Dict, key: Optional[str]) -> List[cst.BaseExpression]:
    return [
        element.value for element in literal.elements
        if isinstance(element, cst.DictElement) and (key is None or string_value(element.key) == key)
    ]


def _is_library_constant(qualified: Optional[str]) -> bool:
    """An attribute of torch, numpy or math itself (`torch.float32`,
    `torch.long`, `np.pi`, `math.inf`): a dtype or a number, never a graph."""
    if qualified is None or "." not in qualified:
        return False
    return qualified.split(".", 1)[0] in ("torch", "numpy", "math") and qualified.count(".") == 1


def _is_reduction(node: cst.CSTNode, facts: "Facts") -> bool:
    if not isinstance(node, cst.Call):
        return False
    if isinstance(node.func, cst.Attribute) and node.func.attr.value in _REDUCTIONS | {"norm"}:
        return facts.names.qualified(node.func) is None
    return facts.names.qualified(node.func) in ("torch.mean", "torch.sum", "torch.norm")


def _summed_into(statement: Optional[cst.CSTNode], value: cst.CSTNode) -> Optional[str]:
    """The name `value` is assigned or added to: `loss = value`, `loss += value`."""
    if isinstance(statement, cst.Assign) and statement.value is value and len(statement.targets) == 1:
        target = statement.targets[0].target
        return target.value if isinstance(target, cst.Name) else None
    if isinstance(statement, cst.AnnAssign) and statement.value is value and isinstance(statement.target, cst.Name):
        return statement.target.value
    if isinstance(statement, cst.AugAssign) and statement.value is value and isinstance(statement.target, cst.Name):
        if isinstance(statement.operator, (cst.AddAssign, cst.SubtractAssign)):
            return statement.target.value
    return None
