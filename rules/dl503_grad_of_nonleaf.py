from __future__ import annotations

import libcst as cst

from detachlint.analysis.names import dotted
from detachlint.analysis.values import Holds
from detachlint.rule import Invalid, Rule

# A computed tensor: requires grad through its graph, and is not a leaf.
_NONLEAF = Holds.ACTIVATION | Holds.LOSS
_LEAF_OR_DETACHED = Holds.PARAM | Holds.LEAF | Holds.DETACHED | Holds.DATA | Holds.NUMBER


class GradOfNonleaf(Rule):
    """Reading `.grad` of a computed tensor that never called `retain_grad()`.

    ## What it does
    Flags `out.grad` when `out` is the result of a computation that requires
    grad (a model's output, a loss, an activation), and nothing in the same
    function calls `out.retain_grad()`.

    ## Why is this bad?
    autograd keeps gradients only for leaves (parameters and tensors made
    with `requires_grad=True`). For any other tensor, `.grad` stays `None`
    after `backward()`, and torch only warns "The .grad attribute of a
    Tensor that is not a leaf Tensor is being accessed". Saliency maps,
    feature attributions and gradient logging built this way read `None`,
    or crash a few lines later on `None.abs()`.

    ## Example
    ```python
    import torch

    def saliency(model, image, label):
        features = model.backbone(image)
        score = model.head(features)[0, label]
        score.backward()
        return features.grad.abs()
    ```

    Use instead:
    ```python
    import torch

    def saliency(model, image, label):
        features = model.backbone(image)
        features.retain_grad()
        score = model.head(features)[0, label]
        score.backward()
        return features.grad.abs()
    ```

    ## Not flagged
    - `.grad` of parameters and of tensors made with `requires_grad=True`
      (or `.detach().requires_grad_()`): they are leaves.
    - A tensor whose `retain_grad()` is called in the same function, or
      that a backward names in `inputs=` (`b.backward(inputs=[a])` fills
      `a.grad`).
    - Assignments to `.grad` and test code.

    ## Fix safety
    No fix: whether to call `retain_grad()` or to take the gradient with
    `torch.autograd.grad(score, features)` is the author's choice.

    ## Verification
    No probe yet: torch's own warning names the problem when it runs.

    ## References
    - PyTorch docs, `torch.Tensor.retain_grad` and `torch.Tensor.is_leaf`.
    """

    code = "DL503"
    name = "grad-of-nonleaf"
    message = "`{expr}` is None: `{tensor}` is computed, not a leaf, and keeps no gradient without `{tensor}.retain_grad()`"
    severity = "error"
    default_enabled = True

    valid = [
        # backward(inputs=...) fills the gradient of a non-leaf too.
        """
        import torch

        def grad_of_intermediate():
            a = torch.ones(3, requires_grad=True) * 2
            b = (a * a).sum()
            b.backward(inputs=[a])
            return a.grad
        """,
        # A leaf made for the purpose.
        """
        import torch

        def saliency(model, image, label):
            image = image.detach().requires_grad_()
            model(image)[0, label].backward()
            return image.grad.abs()
        """,
        # retain_grad.
        """
        import torch

        def saliency(model, image, label):
            features = model.backbone(image)
            features.retain_grad()
            model.head(features)[0, label].backward()
            return features.grad.abs()
        """,
        # Parameters.
        """
        from torch import nn

        def grad_norm(model: nn.Module):
            total = 0.0
            for p in model.parameters():
                total += p.grad.norm().item()
            return total
        """,
        # Writing .grad, in a test.
        """
        import torch

        def test_no_grad_kept(model):
            out = model(torch.ones(1, 3))
            out.sum().backward()
            assert out.grad is None
        """,
    ]

    invalid = [
        Invalid(
            """
            import torch

            def saliency(model, image, label):
                features = model.backbone(image)
                score = model.head(features)[0, label]
                score.backward()
                return features.grad.abs()
            """,
            line=7,
            column=12,
            message="`features.grad` is None",
        ),
        Invalid(
            """
            import torch.nn.functional as F

            def log_logit_gradients(model, x, y, writer, step):
                logits = model(x)
                loss = F.cross_entropy(logits, y)
                loss.backward()
                writer.add_histogram("logits/grad", logits.grad, step)
            """,
            line=7,
        ),
        Invalid(
            """
            from torch import nn

            class Probe(nn.Module):
                def __init__(self, encoder):
                    super().__init__()
                    self.encoder = encoder

                def attribution(self, x):
                    hidden = self.encoder(x)
                    hidden.norm().backward()
                    return hidden.grad
            """,
            line=11,
        ),
    ]

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "grad" or not isinstance(node.value, cst.Name):
            return
        index = self.facts.index
        parent = index.parent(node)
        if isinstance(parent, (cst.AssignTarget, cst.AugAssign)) and getattr(parent, "target", None) is node:
            return
        holds = self.facts.values.holds(node.value)
        if not holds & _NONLEAF or holds & _LEAF_OR_DETACHED or self.facts.intent.is_test_code(node):
            return
        name = node.value.value
        scope = index.scope_of(node)
        for call in index.descendants(scope, cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "retain_grad" and dotted(func.value) == name:
                return
        if self.facts.values.grad_requested(name, scope):
            return  # `backward(inputs=[name])` fills it
        self.report(node, expr=self.facts.module.code_for_node(node), tensor=name)
