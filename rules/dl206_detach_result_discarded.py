from __future__ import annotations

from typing import Iterator, Optional, Set, Tuple

import libcst as cst

from detachlint.analysis.priors import MODEL_NAME
from detachlint.analysis.values import Holds
from detachlint.analysis.vocabulary import DEVICE_DTYPE_CASTS, MODULE_API, TENSOR_ONLY_METHODS
from detachlint.rule import Invalid, Replace, Rule

# Out-of-place tensor methods whose only effect is the value they return.
_CUTS = {"detach"}
_COPIES = {"clone", "contiguous"}
# These are in place on modules (`model.cuda()` returns the module itself),
# so they are flagged only on values known to be tensors.
_TENSOR_ONLY = DEVICE_DTYPE_CASTS
_TENSORS = Holds.ACTIVATION | Holds.LOSS | Holds.DETACHED | Holds.DATA | Holds.LEAF
# Values that are tensors whatever the code around them (not a model's output element).
_PLAIN_TENSORS = Holds.LOSS | Holds.DETACHED | Holds.DATA | Holds.LEAF


def _receiver(call: cst.Call) -> Optional[cst.BaseExpression]:
    return call.func.value if isinstance(call.func, cst.Attribute) else None


def _method(call: cst.Call) -> Optional[str]:
    return call.func.attr.value if isinstance(call.func, cst.Attribute) else None


def _unwrap(call: cst.Call) -> Tuple[cst.BaseExpression, Set[str]]:
    """`x` and {"detach", "clone"} for `x.detach().clone()`."""
    expr: cst.BaseExpression = call
    chain: Set[str] = set()
    while isinstance(expr, cst.Call) and _method(expr) in _CUTS | _COPIES | _TENSOR_ONLY:
        chain.add(_method(expr))  # type: ignore[arg-type]
        expr = _receiver(expr)  # type: ignore[assignment]
    return expr, chain


class DetachResultDiscarded(Rule):
    """`x.detach()` as a statement: nothing was cut.

    ## What it does
    Flags `x.detach()`, `x.detach().clone()`, `x.clone()` and the like written
    as statements of their own, or as comprehensions thrown away
    (`[h.detach() for h in hidden]`): out-of-place calls whose result nobody
    keeps. In a notebook, a cell's last expression is displayed (unless a
    `;` follows it), so its result is kept and it is not flagged.

    ## Why is this bad?
    `detach()` returns a new tensor cut from the graph; it does not change
    `x`. The author meant to stop gradients at `x` (a DQN target, a critic's
    bootstrap value, an RNN state carried to the next window), and `x` is as
    attached as before: gradients flow into the target network, or the next
    window's backward raises "Trying to backward through the graph a second
    time". `x.detach_()` and `x = x.detach()` are what was meant.

    ## Example
    ```python
    import torch

    def td_target(q_target, reward, next_state, gamma):
        next_q = q_target(next_state).max(1)[0]
        next_q.detach()
        return reward + gamma * next_q
    ```

    Use instead:
    ```python
    import torch

    def td_target(q_target, reward, next_state, gamma):
        next_q = q_target(next_state).max(1)[0]
        next_q = next_q.detach()
        return reward + gamma * next_q
    ```

    ## Not flagged
    - `x.detach_()`, and calls whose result is used or assigned.
    - A statement whose last call works in place (`p.detach().copy_(q)`,
      `x.detach().zero_()`).
    - `model.cuda()`, `model.to(device)`, `model.float()`: in place on modules.
    - `state.detach()` on a value not known to be a tensor when a class of
      the file defines its own `detach()` (a decoder state that detaches
      the tensors it holds in place).

    ## Fix safety
    The fix assigns the result back (`next_q = next_q.detach()`). It is
    unsafe: it changes the gradients, which is the point. On a loop's
    variable (`for s in state: s.detach()`) assigning back would rebind
    only the variable, so the fix detaches in place (`s.detach_()`), which
    raises on a view rather than doing nothing.

    ## Verification
    The probe runs the code to the statement and reads the tensor right
    after it: confirmed when it still has a `grad_fn` (the dropped
    `.detach()` cut nothing). A tensor without a graph upstream at that
    point (no grad, or a leaf) gives `inconclusive`; a dropped `.to()` or
    `.clone()` shows nothing on the CPU. Refuted when the name holds an
    object of the file's own class whose `detach()` method the statement
    calls (what that method did is reported).

    ## References
    - PyTorch docs, `torch.Tensor.detach` and `torch.Tensor.detach_`.
    """

    code = "DL206"
    name = "detach-result-discarded"
    message = "`{call}` returns a new tensor and the result is thrown away: `{name}` is unchanged{consequence}; assign it back (`{name} = {call}`)"
    harm = "wrong-gradients"
    default_enabled = True
    fix_title = "Assign the result back"

    valid = [
        """
        import torch

        def td_target(q_target, reward, next_state, gamma):
            next_q = q_target(next_state).max(1)[0].detach()
            return reward + gamma * next_q
        """,
        # In place: detach_ and writes through a detached alias.
        """
        import torch

        def carry(state, averaged, current):
            state.detach_()
            averaged.detach().copy_(current)
            return state
        """,
        # Modules move in place, whatever they are called.
        """
        import torch

        def load_branch(make_network, reference, device):
            branch = make_network(num_classes=10)
            branch.load_state_dict(reference.state_dict())
            branch.to(device)
            return branch

        def setup(model, device):
            model.cuda()
            model.to(device)
            model.float()
            return model
        """,
        # The file's own state object, whose `detach()` works in place.
        """
        import torch

        class DecoderState:
            def __init__(self, hidden):
                self.hidden = hidden

            def detach(self):
                self.hidden = tuple(h.detach() for h in self.hidden)

        def train_chunks(model, optimizer, chunks):
            state = None
            for source, target in chunks:
                output, state = model(source, state)
                loss = torch.nn.functional.cross_entropy(output, target)
                loss.backward()
                optimizer.step()
                state.detach()
        """,
    ]

    invalid = [
        # A parameter of unknown type, used as a tensor in its scope (`ndimension`, indexing).
        Invalid(
            """
            import numpy as np
            import torch

            def look(vertices, direction=None):
                device = vertices.device
                if direction is None:
                    direction = torch.from_numpy(np.array([0, 1, 0], np.float32)).to(device)
                else:
                    direction.to(device)
                if direction.ndimension() == 1:
                    direction = direction[None, :]
                return vertices - direction
            """,
            line=9,
        ),
        Invalid(
            """
            import torch

            def td_target(q_target, reward, next_state, gamma):
                next_q = q_target(next_state).max(1)[0]
                next_q.detach()
                return reward + gamma * next_q
            """,
            line=5,
            message="`next_q.detach()` returns a new tensor and the result is thrown away",
            fixed="""
            import torch

            def td_target(q_target, reward, next_state, gamma):
                next_q = q_target(next_state).max(1)[0]
                next_q = next_q.detach()
                return reward + gamma * next_q
            """,
        ),
        Invalid(
            """
            import torch

            def carry(model, x, hidden):
                out, hidden = model(x, hidden)
                [h.detach() for h in hidden]
                return out, hidden
            """,
            line=5,
            message="`h.detach()`",
        ),
        Invalid(
            """
            import torch

            class Agent:
                def update(self, obs):
                    self.hidden.detach().clone()
                    return self.policy(obs, self.hidden)
            """,
            line=5,
        ),
        Invalid(
            """
            import torch

            def logits_on_cpu(model, x):
                out = model(x)
                out.cpu()
                return out.numpy()
            """,
            line=5,
        ),
    ]

    def visit_Expr(self, node: cst.Expr) -> None:
        if self.facts.displayed_lines and self.facts.positions[node].start.line in self.facts.displayed_lines:
            return  # a notebook cell's last expression: IPython displays its value
        value = node.value
        if isinstance(value, cst.Call):
            self._check(node, value, comprehension=False)
        elif isinstance(value, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
            for call in _element_calls(value.elt):
                self._check(node, call, comprehension=True)

    def _looks_like_module(self, value: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """`b1_model = self.network(...)`: named like a model, or used as one
        in its scope (`b1_model.load_state_dict(...)`)."""
        text = self.facts.module.code_for_node(value)
        if MODEL_NAME.fullmatch(text.rsplit(".", 1)[-1]):
            return True
        scope = self.facts.index.scope_of(at)
        for call in self.facts.index.descendants(scope, cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in _MODULE_METHODS:
                if self.facts.module.code_for_node(func.value) == text:
                    return True
        return False

    def _used_as_tensor(self, value: cst.BaseExpression, at: cst.CSTNode) -> bool:
        """`direction.ndimension()` elsewhere in the scope: a method only a
        tensor has (no module has `dim`, `view` or `unsqueeze`, no array has
        `.to()`), so `direction.to(device)` is a tensor's copy."""
        text = self.facts.module.code_for_node(value)
        scope = self.facts.index.scope_of(at)
        for call in self.facts.index.descendants(scope, cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in TENSOR_ONLY_METHODS:
                if self.facts.module.code_for_node(func.value) == text:
                    return True
        return False

    def _check(self, statement: cst.Expr, call: cst.Call, comprehension: bool) -> None:
        method = _method(call)
        if method not in _CUTS | _COPIES | _TENSOR_ONLY:
            return
        tensor, chain = _unwrap(call)
        if not chain & (_CUTS | _COPIES):
            # `.to()`/`.cpu()` alone: only on values known to be tensors.
            holds = self.facts.values.holds(tensor)
            known = holds & _TENSORS or self._used_as_tensor(tensor, statement)
            if not known or holds & Holds.MODEL or self._looks_like_module(tensor, statement):
                return
        elif self.facts.values.holds(tensor) & (Holds.MODEL | Holds.OPTIMIZER):
            return
        elif method in self.facts.values.class_methods and not self.facts.values.holds(tensor) & _PLAIN_TENSORS:
            # `dec_state.detach()`, and a class of the file defines `detach`:
            # unless the value is surely a tensor, most likely that method (a
            # model may return such a state object beside its output).
            return
        name = self.facts.module.code_for_node(tensor)
        text = self.facts.module.code_for_node(call)
        consequence = ", still attached to its graph" if "detach" in chain else ""
        loop = self._loop_over(tensor, statement)
        if loop is not None and not comprehension:
            # `for s in state: s.detach()`: assigning back would rebind only the loop variable.
            container = self.facts.module.code_for_node(loop.iter)
            fix = None
            if chain == {"detach"} and _method(call) == "detach":
                fix = Replace(call, call.with_changes(func=call.func.with_changes(attr=cst.Name("detach_"))), unsafe=True)
            self.report(call, fix=fix, template=_LOOP_MESSAGE, call=text, name=name, consequence=consequence, container=container)
            return
        fix = None
        if not comprehension and isinstance(tensor, (cst.Name, cst.Attribute)):
            assign = cst.Assign(targets=[cst.AssignTarget(tensor)], value=call)
            fix = Replace(statement, assign, unsafe=True)
        self.report(call, fix=fix, call=text, name=name, consequence=consequence)

    def _loop_over(self, tensor: cst.BaseExpression, statement: cst.Expr) -> Optional[cst.For]:
        """The `for` whose variable `tensor` is, around `statement`."""
        if not isinstance(tensor, cst.Name):
            return None
        loop = self.facts.index.enclosing(statement, cst.For)
        if loop is None or not isinstance(loop.target, cst.Name) or loop.target.value != tensor.value:
            return None
        if self.facts.index.scope_of(loop) is not self.facts.index.scope_of(statement):
            return None
        return loop


_LOOP_MESSAGE = (
    "`{call}` returns a new tensor and the result is thrown away: `{name}` is unchanged{consequence}, and "
    "`{name} = {call}` would rebind only the loop variable, not what `{container}` holds; detach each in place "
    "(`{name}.detach_()`) or rebind the container (`{container} = tuple({name}.detach() for {name} in {container})`)"
)

# Methods that only a module has: not the casts a tensor shares (nor `type`, `ipu`, `xpu`).
_MODULE_METHODS = MODULE_API - DEVICE_DTYPE_CASTS - {"type", "ipu", "xpu"}


def _element_calls(elt: cst.BaseExpression) -> Iterator[cst.Call]:
    """The calls a comprehension's element is made of: `h.detach()`, and the
    elements of nested comprehensions and tuples."""
    if isinstance(elt, cst.Call):
        yield elt
    elif isinstance(elt, (cst.ListComp, cst.SetComp, cst.GeneratorExp)):
        yield from _element_calls(elt.elt)
    elif isinstance(elt, (cst.Tuple, cst.List)):
        for element in elt.elements:
            yield from _element_calls(element.value)
