from __future__ import annotations

import libcst as cst

from detachlint.analysis.values import Holds
from detachlint.rule import Invalid, Rule

_NONLEAF = Holds.ACTIVATION | Holds.LOSS
_LEAF_OR_DETACHED = Holds.PARAM | Holds.LEAF | Holds.DETACHED | Holds.DATA | Holds.NUMBER


def _computed(holds: Holds) -> bool:
    return bool(holds & _NONLEAF) and not holds & _LEAF_OR_DETACHED


def _is_false(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "False"


class RequiresGradFlagOnNonleaf(Rule):
    """Setting `requires_grad` on a computed tensor, which raises; `detach()` was meant.

    ## What it does
    Flags `out.requires_grad = ...` and `out.requires_grad_(False)` when
    `out` is computed from something that requires grad (a model's output,
    a loss, an activation), also when it becomes so on a later pass of a
    loop: `x.requires_grad = True` at the top of an attack loop whose body
    ends with `x = x + step` (the new `x` is computed from the flagged one).
    Also flags the call that hands a computed tensor to a function of the
    file which sets the flag on what it is given: `p.requires_grad_(False)`
    on a parameter, on the elements of `*items`, on what a generator of the
    file yields from them, or through another such function
    (`with frozen(model, delta):` where `frozen(*items)` calls
    `freeze(*items)`).

    ## Why is this bad?
    Only leaves have a `requires_grad` flag of their own; for a computed
    tensor it follows from its inputs. Setting it raises `RuntimeError: you
    can only change requires_grad flags of leaf variables. If you want to
    use a computed variable in a subgraph that doesn't require
    differentiation use var_no_grad = var.detach()`. The intent, stopping
    gradients at `out`, is `out = out.detach()`; the intent of making an
    input require grad is `x = x.detach().requires_grad_()`.

    ## Example
    ```python
    import torch

    def target_features(teacher, x):
        feats = teacher(x)
        feats.requires_grad = False
        return feats
    ```

    Use instead:
    ```python
    import torch

    def target_features(teacher, x):
        feats = teacher(x).detach()
        return feats
    ```

    ## Not flagged
    - Parameters, tensors made with `requires_grad=True`, data batches and
      detached tensors: they are leaves.
    - Tensors computed under `torch.no_grad()`, which are leaves too.
    - A loop that re-detaches the tensor before the next pass
      (`x = (x + step).detach()`), or leaves the loop (`break`) right after
      computing it.
    - `out.requires_grad_()` / `requires_grad_(True)` on a tensor that
      already requires grad: torch accepts it.
    - A freezing helper given modules, leaves (`torch.zeros(n, requires_grad=True)`)
      or detached copies (`frozen(model, delta.detach())`).

    ## Fix safety
    No fix: `.detach()` would change what later code receives.

    ## Verification
    The probe runs the code to the statement: confirmed when it raises "you
    can only change requires_grad flags of leaf variables", refuted when it
    runs through.

    ## References
    - PyTorch docs, `torch.Tensor.requires_grad_` and "Leaf tensors".
    """

    code = "DL504"
    name = "requires-grad-flag-on-nonleaf"
    message = "`{statement}` raises \"you can only change requires_grad flags of leaf variables\": `{tensor}` is computed; use `{instead}`"
    harm = "raises"
    default_enabled = True

    valid = [
        # A freezing helper given a model and a leaf, or a detached copy.
        """
        import torch
        from torch import nn

        def freeze(*items):
            for item in items:
                item.requires_grad_(False)

        def score(model, base, x, scale=2.0):
            freeze(base)
            delta = scale * base
            freeze(delta.detach())
            return model(x + delta).sum().item()

        score(nn.Linear(4, 3), torch.zeros(5, 4, requires_grad=True), torch.randn(5, 4))
        """,
        # detach instead.
        """
        def target_features(teacher, x):
            return teacher(x).detach()
        """,
        # Parameters.
        """
        from torch import nn

        def freeze(model: nn.Module):
            for p in model.parameters():
                p.requires_grad = False
        """,
        # Data and detached tensors are leaves.
        """
        import torch

        def prepare(model, images):
            images.requires_grad = True
            feats = model(images).detach()
            feats.requires_grad_(True)
            return images, feats
        """,
        # Computed under no_grad: a leaf.
        """
        import torch

        def teacher_targets(teacher, x):
            with torch.no_grad():
                feats = teacher(x)
            feats.requires_grad = False
            return feats
        """,
        # requires_grad_() on a computed tensor that already requires grad.
        """
        def features(model, x):
            out = model(x)
            out.requires_grad_()
            return out
        """,
        # Re-detached before the next pass; the computed one leaves the loop.
        """
        import torch

        def attack(model, image, steps=3, overshoot=0.02):
            for _ in range(steps):
                image.requires_grad = True
                score = model(image).max()
                grad, = torch.autograd.grad(score, image)
                if score < 0:
                    image = image + overshoot * grad
                    break
                image = (image + overshoot * grad).detach()
            return image
        """,
    ]

    invalid = [
        Invalid(
            """
            import torch
            from torch import nn

            def _iter_params(items):
                for item in items:
                    if isinstance(item, nn.Module):
                        yield from item.parameters()
                    else:
                        yield item

            def freeze(*items):
                for param in _iter_params(items):
                    param.requires_grad_(False)

            def score_scaled(model, base, x, scale=2.0):
                delta = scale * base
                freeze(model, delta)
                return model(x + delta).sum().item()

            score_scaled(nn.Linear(4, 3), torch.zeros(5, 4, requires_grad=True), torch.randn(5, 4))
            """,
            line=17,
            message="`delta` is computed; use `delta.detach()`",
        ),
        Invalid(
            """
            import torch

            def deepfool(model, image, steps=3, overshoot=0.02):
                for _ in range(steps):
                    image.requires_grad = True
                    score = model(image).max()
                    grad, = torch.autograd.grad(score, image)
                    image = torch.clamp(image + overshoot * grad, 0, 1)
                return image
            """,
            line=5,
            message="`image` is computed",
        ),
        Invalid(
            """
            import torch

            def target_features(teacher, x):
                feats = teacher(x)
                feats.requires_grad = False
                return feats
            """,
            line=5,
            column=5,
            message="`feats` is computed; use `feats.detach()`",
        ),
        Invalid(
            """
            from torch import nn

            class Distiller(nn.Module):
                def __init__(self, student, teacher):
                    super().__init__()
                    self.student = student
                    self.teacher = teacher

                def forward(self, x):
                    soft = self.teacher(x).softmax(-1)
                    soft.requires_grad_(False)
                    return self.student(x), soft
            """,
            line=11,
        ),
        Invalid(
            """
            import torch.nn.functional as F

            def input_saliency(model, x, y):
                emb = model.encoder(x)
                emb.requires_grad = True
                loss = F.cross_entropy(model.classify(emb), y)
                loss.backward()
            """,
            line=5,
        ),
    ]

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            attribute = target.target
            if isinstance(attribute, cst.Attribute) and attribute.attr.value == "requires_grad":
                self._check(node, attribute.value, wants_grad=not _is_false(node.value))

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_":
            if node.args and _is_false(node.args[0].value):
                self._check(node, func.value, wants_grad=False)
            return
        # `frozen(model, delta)` with a helper of the file that flips the
        # flag of what it is given: raises for a computed `delta`.
        across = self.facts.values.across_calls
        for argument in across.flagged_arguments(node):
            if not isinstance(argument, cst.Name) or not _computed(across.holds(argument)):
                continue
            if self.facts.intent.is_test_code(node):
                return
            self.report(
                node,
                statement=self.facts.module.code_for_node(node),
                tensor=argument.value,
                instead=f"{argument.value}.detach()",
            )

    def _check(self, node: cst.CSTNode, tensor: cst.BaseExpression, wants_grad: bool) -> None:
        if not isinstance(tensor, cst.Name):
            return
        values = self.facts.values
        if not _computed(values.holds(tensor)):
            # On a later pass of a loop, what the end of the previous pass left:
            # `x.requires_grad = True ... x = x + step` makes `x` computed.
            scope = values.scope(tensor)
            carried = [
                values.binding_holds(tensor.value, binding, value, Holds.NOTHING)
                for binding, value in scope.loop_carried(tensor)
            ]
            if not any(_computed(holds) for holds in carried):
                return
        if self.facts.intent.is_test_code(node):
            return
        statement = self.facts.module.code_for_node(node)
        instead = f"{tensor.value}.detach().requires_grad_()" if wants_grad else f"{tensor.value}.detach()"
        self.report(node, statement=statement, tensor=tensor.value, instead=instead)
