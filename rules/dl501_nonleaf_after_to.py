from __future__ import annotations

from typing import Iterator, Optional, Tuple

import libcst as cst

from detachlint.analysis.names import dotted
from detachlint.analysis.values import Holds
from detachlint.analysis.vocabulary import DEVICE_DTYPE_CASTS, FACTORIES
from detachlint.rule import Invalid, Replace, Rule

# Methods that return a new tensor, computed from their receiver, when they
# move or cast it (`.cpu()` and `.float()` are left out: a factory's CPU float32
# result is returned as is).
_MOVES = DEVICE_DTYPE_CASTS - {"cpu", "float"}


def _requires_grad_true(call: cst.Call) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "requires_grad":
            if isinstance(arg.value, cst.Name) and arg.value.value == "True":
                return arg
    return None


def _parenthesized(expr: cst.BaseExpression) -> cst.BaseExpression:
    if isinstance(expr, (cst.BinaryOperation, cst.UnaryOperation)) and not expr.lpar:
        return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    return expr


class NonleafAfterTo(Rule):
    """A tensor made with `requires_grad=True`, then moved, cast or scaled: the name holds a non-leaf.

    ## What it does
    Flags an assignment such as `w = torch.randn(3, requires_grad=True).cuda()`
    (or `.to(device)`, `.double()`, `.half()`, `* 0.01`) when the assigned
    name is later handed to an optimizer or has its `.grad` read. Also
    flags `emb.requires_grad_()` (or `emb.requires_grad = True`) on a tensor
    computed from tensors in the graph (a slice or clone of a model's
    output, also one a method of the class stored on `self`) when `emb` is
    then handed to an optimizer, directly, in a param group, or through a
    list of the class it was appended to.

    ## Why is this bad?
    `requires_grad=True` makes the factory's result a leaf; `.cuda()` or `*
    0.01` then computes a *new* tensor from it, which autograd treats as an
    intermediate result. The name holds that non-leaf: after `backward()` its
    `.grad` is None (the gradient lands on the unnamed leaf), and
    `torch.optim.SGD([w], ...)` raises "can't optimize a non-leaf Tensor".
    The code reads as if `w` were a trainable weight; it never is.

    ## Example
    ```python
    import torch

    device = torch.device("cuda")
    w = torch.randn(10, 1, requires_grad=True).to(device)
    optimizer = torch.optim.SGD([w], lr=0.1)
    ```

    Use instead:
    ```python
    import torch

    device = torch.device("cuda")
    w = torch.randn(10, 1, device=device, requires_grad=True)
    optimizer = torch.optim.SGD([w], lr=0.1)
    ```

    ## Not flagged
    - `.requires_grad_()` called last, or the tensor wrapped in `nn.Parameter`.
    - A moved tensor that is only used as an input (its gradient read with
      `torch.autograd.grad`, or not at all): a non-leaf is fine there.
    - `.float()`, which returns a float32 factory result unchanged.
    - A model output detached first, then flagged
      (`emb = text_encoder(ids).detach().clone(); emb.requires_grad_()`):
      a leaf the optimizer accepts.

    ## Fix safety
    The fix moves `requires_grad=True` to the end of the chain:
    `torch.randn(10, 1).to(device).requires_grad_()`. The named tensor
    becomes the leaf the code meant; the only behaviour that changes is the
    one the rule is about (its `.grad` fills in, the optimizer accepts it).
    It is safe.

    ## Verification
    The probe builds the tensor as written and runs a backward through it:
    `is_leaf` is False and `.grad` stays None.

    ## References
    - PyTorch autograd notes, "Leaf tensors"; the "can't optimize a non-leaf
      Tensor" error raised by `torch.optim.Optimizer`.
    """

    code = "DL501"
    name = "nonleaf-after-to"
    fix_title = "Make the tensor require grad last: `.requires_grad_()`"
    message = "`{name}` is not a leaf: {why}, so `{name}.grad` stays None and optimizers refuse it"
    harm = "wrong-gradients"
    default_enabled = True

    valid = [
        # Detached first: the flag makes a leaf.
        """
        import torch
        from torch import nn

        class PromptTuner(nn.Module):
            def __init__(self, text_encoder, ids, n):
                super().__init__()
                self.text_encoder = text_encoder
                self.text_embedding = self.text_encoder(ids)
                self.prompts = []
                for i in range(n):
                    embedding = self.text_embedding[:, i:i + 1].detach().clone()
                    embedding.requires_grad_(True)
                    self.prompts.append(embedding)

            def configure_optimizers(self):
                return torch.optim.Adam([{"params": self.prompts, "lr": 0.1}])
        """,
        # backward(inputs=...) fills `.grad` of the moved tensor anyway.
        """
        import torch

        def demo():
            a = torch.tensor([1.0, 2.0], requires_grad=True).to("cpu")
            b = a * a
            torch.autograd.backward(b, grad_tensors=torch.ones_like(b), inputs=a)
            return a.grad
        """,
        # Created on the device directly.
        """
        import torch

        w = torch.randn(10, 1, device="cuda", requires_grad=True)
        optimizer = torch.optim.SGD([w], lr=0.1)
        """,
        # requires_grad_() last.
        """
        import torch

        w = torch.randn(10, 1).cuda().requires_grad_()
        optimizer = torch.optim.SGD([w], lr=0.1)
        """,
        # Wrapped in a Parameter.
        """
        import torch
        from torch import nn

        class Scale(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = nn.Parameter(torch.ones(1, requires_grad=True).double())
        """,
        # Only an input: its gradient is taken with autograd.grad.
        """
        import torch

        def input_gradient(model, device):
            x = torch.randn(4, 3, requires_grad=True).to(device)
            out = model(x).sum()
            (grad,) = torch.autograd.grad(out, x)
            return grad
        """,
        # float() keeps a float32 leaf.
        """
        import torch

        w = torch.zeros(3, requires_grad=True).float()
        print(w.grad)
        """,
    ]

    invalid = [
        # A slice of a text encoder's output, cloned and flagged: still a non-leaf.
        Invalid(
            """
            import torch
            from torch import nn

            class PromptTuner(nn.Module):
                def __init__(self, text_encoder, ids, n):
                    super().__init__()
                    self.text_encoder = text_encoder
                    self.text_embedding = self.text_encoder(ids)
                    self.prompts = []
                    for i in range(n):
                        embedding = self.text_embedding[:, i:i + 1].clone()
                        embedding.requires_grad_(True)
                        self.prompts.append(embedding)

                def configure_optimizers(self):
                    return torch.optim.Adam([{"params": self.prompts, "lr": 0.1}])
            """,
            line=12,
            message="`embedding` is not a leaf: it is computed from tensors in the graph",
        ),
        Invalid(
            """
            import torch

            device = torch.device("cuda")
            w = torch.randn(10, 1, requires_grad=True).to(device)
            optimizer = torch.optim.SGD([w], lr=0.1)
            """,
            line=4,
            column=5,
            message="`w` is not a leaf: `.to(device)` after `requires_grad=True`",
            fixed="""
            import torch

            device = torch.device("cuda")
            w = torch.randn(10, 1).to(device).requires_grad_()
            optimizer = torch.optim.SGD([w], lr=0.1)
            """,
        ),
        Invalid(
            """
            import torch

            def fit(x, y, steps=100):
                w = torch.randn(x.shape[1], 1, requires_grad=True) * 0.01
                for _ in range(steps):
                    loss = ((x @ w - y) ** 2).mean()
                    loss.backward()
                    with torch.no_grad():
                        w -= 0.1 * w.grad
                        w.grad.zero_()
                return w
            """,
            line=4,
            message="`* 0.01`",
            fixed="""
            import torch

            def fit(x, y, steps=100):
                w = (torch.randn(x.shape[1], 1) * 0.01).requires_grad_()
                for _ in range(steps):
                    loss = ((x @ w - y) ** 2).mean()
                    loss.backward()
                    with torch.no_grad():
                        w -= 0.1 * w.grad
                        w.grad.zero_()
                return w
            """,
        ),
        Invalid(
            """
            import torch as th

            class Attack:
                def __init__(self, shape):
                    self.delta = th.zeros(shape, requires_grad=True).cuda()
                    self.optimizer = th.optim.Adam([self.delta], lr=0.01)
            """,
            line=5,
            fixed="""
            import torch as th

            class Attack:
                def __init__(self, shape):
                    self.delta = th.zeros(shape).cuda().requires_grad_()
                    self.optimizer = th.optim.Adam([self.delta], lr=0.01)
            """,
        ),
    ]

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) == 1:
            self._check(node.targets[0].target, node.value)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        if node.value is not None:
            self._check(node.target, node.value)

    def _check(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        name = dotted(target)
        if name is None:
            return
        found = self._moved_factory(value)
        if found is None:
            return
        factory, step = found
        if not self._used_as_leaf(target, name):
            return
        flag = _requires_grad_true(factory)
        assert flag is not None
        args = [arg for arg in factory.args if arg is not flag]
        if args:
            args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        rebuilt = value.deep_replace(factory, factory.with_changes(args=args))
        assert isinstance(rebuilt, cst.BaseExpression)
        fixed = cst.Call(cst.Attribute(_parenthesized(rebuilt), cst.Name("requires_grad_")))
        self.report(value, fix=Replace(value, fixed), name=name, why=f"`{step}` after `requires_grad=True` makes a new tensor")

    def visit_Call(self, node: cst.Call) -> None:
        """`torch.optim.Adam([emb])` where `emb` was computed from tensors in
        the graph and then flagged with `emb.requires_grad_()`: the flag
        leaves a non-leaf as it is, and the optimizer raises."""
        facts = self.facts
        qualified = facts.names.call_name(node) or ""
        if not qualified.startswith("torch.optim.") or qualified.count(".") != 2 or facts.intent.is_test_code(node):
            return
        for tensor in self._optimized(node):
            flag = self._grad_flag(tensor)
            if flag is None:
                continue
            held = facts.values.holds(tensor)
            if not held & Holds.ACTIVATION or held & (Holds.PARAM | Holds.LEAF | Holds.DETACHED | Holds.DATA | Holds.MODEL):
                continue
            name = tensor.value
            why = (
                f"it is computed from tensors in the graph, and `{facts.module.code_for_node(flag).strip()}` leaves a non-leaf"
                f" as it is; `{dotted(node.func)}` on line {facts.line_of(node)} raises \"can't optimize a non-leaf Tensor\""
            )
            self.report(flag, name=name, why=why)

    def _optimized(self, call: cst.Call) -> Iterator[cst.Name]:
        """The names whose tensors `call` is given: in lists, param-group
        dicts, names bound to those, and containers of the class the
        tensors were appended to (`self.embeddings_to_optimize`)."""
        values = self.facts.values
        for expr in _expressions(call):
            if isinstance(expr, cst.Name):
                entries = values.scope(expr).assignments.get(expr.value, [])
                if len(entries) == 1 and isinstance(entries[0][2], (cst.List, cst.Tuple, cst.Dict)):
                    yield from self._optimized(cst.Call(func=call.func, args=[cst.Arg(entries[0][2])]))
                else:
                    yield expr
            elif isinstance(expr, cst.Attribute):
                for stored in values.stored_in(expr):
                    if isinstance(stored, cst.Name):
                        yield stored

    def _grad_flag(self, tensor: cst.Name) -> Optional[cst.CSTNode]:
        """The `tensor.requires_grad_()` (or `.requires_grad = True`) statement
        of its function that runs before this read."""
        scope = self.facts.values.scope(tensor)
        for flag in scope.grad_flags.get(tensor.value, ()):
            if self.facts.index.before(flag, tensor):
                return flag
        return None

    def _moved_factory(self, value: cst.BaseExpression) -> Optional[Tuple[cst.Call, str]]:
        """The `requires_grad=True` factory call under moves, casts and
        arithmetic, and the first step taken from it; None otherwise."""
        expr, step = value, None
        code = self.facts.module.code_for_node
        while True:
            if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
                qualified = self.facts.names.call_name(expr) or ""
                if qualified.startswith("torch.") and qualified.rpartition(".")[2] in FACTORIES:
                    break
                method = expr.func.attr.value
                if method not in _MOVES and method != "float":
                    return None
                if method in _MOVES:
                    step = "." + code(expr)[len(code(expr.func.value)):].lstrip(".")
                expr = expr.func.value
            elif isinstance(expr, cst.BinaryOperation):
                left_is_factory = self._is_grad_factory(expr.left)
                if not left_is_factory and not self._is_grad_factory(expr.right):
                    return None
                operator = code(expr.operator).strip()
                other = expr.right if left_is_factory else expr.left
                step = f"{operator} {code(other)}" if left_is_factory else f"{code(other)} {operator}"
                expr = expr.left if left_is_factory else expr.right
            else:
                break
        if not isinstance(expr, cst.Call) or not self._is_grad_factory(expr) or step is None:
            return None
        return expr, step

    def _is_grad_factory(self, expr: cst.BaseExpression) -> bool:
        if not isinstance(expr, cst.Call) or _requires_grad_true(expr) is None:
            return False
        qualified = self.facts.names.call_name(expr) or ""
        return qualified.startswith("torch.") and qualified.rpartition(".")[2] in FACTORIES

    def _used_as_leaf(self, target: cst.BaseExpression, name: str) -> bool:
        """Whether the code later reads `name.grad` or gives `name` to an optimizer."""
        index = self.facts.index
        scope = index.scope_of(target) if isinstance(target, cst.Name) else index.module
        if self.facts.values.grad_requested(name, scope):
            return False  # `backward(inputs=[name])` fills its `.grad` anyway
        for attribute in index.descendants(scope, cst.Attribute):
            if attribute.attr.value == "grad" and dotted(attribute.value) == name:
                return True
        for call in index.descendants(scope, cst.Call):
            qualified = self.facts.names.call_name(call) or ""
            if qualified.startswith("torch.optim.") and any(dotted(n) == name for n in _expressions(call)):
                return True
        return False


def _expressions(call: cst.Call) -> Iterator[cst.BaseExpression]:
    """Every name or attribute chain inside a call's arguments."""
    stack = [arg.value for arg in call.args]
    while stack:
        expr = stack.pop()
        yield expr
        if isinstance(expr, (cst.List, cst.Tuple, cst.Set)):
            stack.extend(element.value for element in expr.elements)
        elif isinstance(expr, cst.Dict):
            stack.extend(element.value for element in expr.elements if isinstance(element, cst.DictElement))
