from __future__ import annotations

from typing import Set, Tuple

import libcst as cst

from detachlint.analysis import Facts
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
    grad (a model's output, a loss, an activation, a submodule called through
    a name such as `layer = model.layer4`, a module output a forward hook
    stored in a container of its class), and nothing calls
    `out.retain_grad()`: not the same function, nor the hook that stored it.
    One finding per tensor and function, at the first read.
    The tensor may come from elsewhere in the file: a parameter of a helper
    that every call gives a computed tensor, or a dict entry
    (`info["means2d"].grad`) whose dict a function of the file built from
    a computed tensor and returned, followed through the calls in between,
    `*args` and the wrapper a decorator-like function returns
    (`jfoo = jit(foo); jfoo(x)`); then flagged only when the file calls
    `retain_grad()` nowhere.

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
    - Hook outputs whose hook calls `output.retain_grad()` before storing them.
    - A parameter taken from a submodule by name (`w = model.fc.weight`),
      or from a `ParameterDict` (`self.splats["means"].grad`).
    - A dict entry whose tensor the file retains (`means2d.retain_grad()`
      where the dict is built).
    - Assignments to `.grad` and test code.

    ## Fix safety
    No fix: whether to call `retain_grad()` or to take the gradient with
    `torch.autograd.grad(score, features)` is the author's choice.

    ## Verification
    The probe runs the code to the statement that reads `.grad` and looks at
    the tensor just before it: confirmed when it is not a leaf, keeps no
    gradient (`retains_grad=False`) and its `.grad` is None; refuted when its
    `.grad` holds a gradient or it is a leaf.

    ## References
    - PyTorch docs, `torch.Tensor.retain_grad` and `torch.Tensor.is_leaf`.
    """

    code = "DL503"
    name = "grad-of-nonleaf"
    message = "`{expr}` is None: `{tensor}` is computed, not a leaf, and keeps no gradient without `{tensor}.retain_grad()`"
    harm = "wrong-gradients"
    default_enabled = True

    valid = [
        # The same wrapper given a leaf.
        """
        import torch

        def record(t):
            return None if t.grad is None else t.grad.clone()

        def traced(fn):
            def wrapped(*args):
                wrapped.grads = [record(a) for a in args]
                return fn(*args)
            return wrapped

        x = torch.randn(3, requires_grad=True)
        (x * 2).sum().backward()
        jsin = traced(torch.sin)
        jsin(x)
        """,
        # The dict's tensor is retained where the dict is built; a ParameterDict entry is a leaf.
        """
        import torch
        import torch.nn.functional as F

        def project(means, viewmat):
            means2d = (means @ viewmat[:3, :3].T)[:, :2]
            means2d.retain_grad()
            return means2d.sum(0), {"means2d": means2d}

        class Runner:
            def __init__(self, n=8):
                self.splats = torch.nn.ParameterDict({"means": torch.nn.Parameter(torch.randn(n, 3))})
                self.viewmat = torch.eye(4)

            def step(self, target):
                render, info = project(self.splats["means"], self.viewmat)
                F.mse_loss(render, target).backward()
                return info["means2d"].grad, self.splats["means"].grad
        """,
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
        # The hook retains the gradient of what it stores.
        """
        from torch import nn

        class Monitor:
            def __init__(self, model: nn.Module):
                self.outputs = {}
                for name, module in model.named_modules():
                    module.register_forward_hook(self._save(name))

            def _save(self, name):
                def hook(module, inputs, output):
                    output.retain_grad()
                    self.outputs[name] = output
                return hook

            def gradient_norms(self):
                norms = {}
                for name, out in self.outputs.items():
                    norms[name] = out.grad.norm().item()
                return norms
        """,
        # A parameter taken from a submodule.
        """
        import torch

        def head_gradient(model, images, labels):
            w = model.fc.weight
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            loss.backward()
            return w.grad
        """,
    ]

    invalid = [
        Invalid(
            """
            import torch

            def record(t):
                return None if t.grad is None else t.grad.clone()

            def traced(fn):
                def wrapped(*args):
                    wrapped.grads = [record(a) for a in args]
                    return fn(*args)
                return wrapped

            x = torch.randn(3, requires_grad=True) + 1
            (x * 2).sum().backward()
            traced(torch.sin)(x)
            jsin = traced(torch.sin)
            jsin(x)
            """,
            line=4,
            message="`t.grad` is None",
        ),
        Invalid(
            """
            import torch
            import torch.nn.functional as F

            def project(means, viewmat):
                means2d = (means @ viewmat[:3, :3].T)[:, :2]
                return means2d.sum(0), {"means2d": means2d}

            class Runner:
                def __init__(self, n=8):
                    self.splats = torch.nn.ParameterDict({"means": torch.nn.Parameter(torch.randn(n, 3))})
                    self.viewmat = torch.eye(4)

                def step(self, target):
                    render, info = project(self.splats["means"], self.viewmat)
                    F.mse_loss(render, target).backward()
                    self.update_state(info)

                def update_state(self, info):
                    return info["means2d"].grad.norm(dim=-1)
            """,
            line=19,
            message="`info[\"means2d\"].grad` is None",
        ),
        Invalid(
            """
            import torch

            def layer_gradient(model, images):
                layer = model.layer4
                features = layer(images)
                features.sum().backward()
                return features.grad
            """,
            line=7,
            message="`features.grad` is None",
        ),
        Invalid(
            """
            from torch import nn

            class Monitor:
                def __init__(self, model: nn.Module):
                    self.outputs = {}
                    for name, module in model.named_modules():
                        module.register_forward_hook(self._save(name))

                def _save(self, name):
                    def hook(module, inputs, output):
                        self.outputs[name] = output
                    return hook

                def gradient_norms(self):
                    norms = {}
                    for name, out in self.outputs.items():
                        norms[name] = out.grad.norm().item()
                    return norms
            """,
            line=17,
            message="`out.grad` is None",
        ),
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

    def __init__(self, facts: Facts) -> None:
        super().__init__(facts)
        self._reported: Set[Tuple[cst.CSTNode, str]] = set()

    def visit_Attribute(self, node: cst.Attribute) -> None:
        tensor = node.value
        if node.attr.value != "grad" or not isinstance(tensor, (cst.Name, cst.Subscript)):
            return
        index = self.facts.index
        parent = index.parent(node)
        if isinstance(parent, (cst.AssignTarget, cst.AugAssign)) and getattr(parent, "target", None) is node:
            return
        values = self.facts.values
        holds = values.holds(tensor) if isinstance(tensor, cst.Name) else Holds.NOTHING
        if not holds:
            # A parameter or a dict entry (`info["means2d"]`): what the file's
            # calls put there. Its `retain_grad()` may be anywhere in the file.
            holds = values.across_calls.holds(tensor)
            if not holds & _NONLEAF or holds & _LEAF_OR_DETACHED or self._file_retains() or self.facts.intent.is_test_code(node):
                return
            code = self.facts.module.code_for_node(tensor)
            if (index.scope_of(node), code) not in self._reported:
                self._reported.add((index.scope_of(node), code))
                self.report(node, expr=self.facts.module.code_for_node(node), tensor=code)
            return
        if not holds & _NONLEAF or holds & _LEAF_OR_DETACHED or self.facts.intent.is_test_code(node):
            return
        name = tensor.value
        scope = index.scope_of(node)
        if (scope, name) in self._reported:
            return  # one finding per tensor and function: the first read
        if self._retained(name, scope) or self.facts.values.grad_requested(name, scope):
            return  # `backward(inputs=[name])` fills it
        # `for k, y in self.outputs.items()`: what a forward hook stored there.
        entry = self.facts.values.scope(scope).assignment_before(name, node.value)
        if entry is not None and isinstance(entry[1], cst.For):
            for stored in self.facts.values.iterated_contents(entry[1], name):
                if isinstance(stored, cst.Name) and self._retained(stored.value, index.scope_of(stored)):
                    return
        self._reported.add((scope, name))
        self.report(node, expr=self.facts.module.code_for_node(node), tensor=name)

    def _file_retains(self) -> bool:
        """Whether the file calls `retain_grad()` anywhere."""
        return any(
            isinstance(call.func, cst.Attribute) and call.func.attr.value == "retain_grad"
            for call in self.facts.index.nodes(cst.Call)
        )

    def _retained(self, name: str, scope: cst.CSTNode) -> bool:
        """Whether `scope` calls `name.retain_grad()`."""
        for call in self.facts.index.descendants(scope, cst.Call):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == "retain_grad" and dotted(func.value) == name:
                return True
        return False
