from __future__ import annotations

import libcst as cst

from detachlint.analysis.loops import LoopFacts
from detachlint.analysis.names import dotted
from detachlint.analysis.values import GRAD
from detachlint.rule import Invalid, Replace, Rule


# NumPy functions that hand a single array-like to its own method of the
# same name (`np.sum(t)` calls `t.sum(axis=None, ...)`), or only look at its
# shape: on a tensor they do not go through `.numpy()`.
_DISPATCHED = {
    "sum", "mean", "std", "var", "max", "min", "amax", "amin", "prod", "argmax", "argmin", "round",
    "around", "clip", "transpose", "reshape", "squeeze", "cumsum", "cumprod", "any", "all", "ptp",
    "trace", "nonzero", "repeat", "take", "sort", "argsort", "shape", "ndim", "size", "isscalar",
    "iterable", "may_share_memory", "shares_memory",
}


def _without_cpu(receiver: cst.BaseExpression) -> cst.BaseExpression:
    """`x` for `x.cpu()`, else the receiver itself: the fix adds `.cpu()` back."""
    if (
        isinstance(receiver, cst.Call)
        and not receiver.args
        and isinstance(receiver.func, cst.Attribute)
        and receiver.func.attr.value == "cpu"
    ):
        return receiver.func.value
    return receiver


class NumpyOnRequiresGrad(Rule):
    """`.numpy()` on a tensor that requires grad.

    ## What it does
    Flags `.numpy()` called on a tensor that is still part of the autograd
    graph: a model output, a loss, a value computed from them or from
    parameters, a parameter, or a leaf created with `requires_grad=True`,
    outside any no-grad region. Also NumPy functions given such tensors
    (`np.asarray(self.cost_his)`, `np.sum(layers, 0)` over a list of
    them), which convert each one with `.numpy()`. The tensor may come in
    through parameters: a helper's argument is in the graph when a call of
    the same file passes it one with grad on (`is_valid_matrix(mat)` called,
    through other helpers, with a model's output), also through `*args`,
    lists it appends to and the elements a `for` takes.

    ## Why is this bad?
    torch refuses to hand out a NumPy view of a tensor that requires grad:
    the call raises `RuntimeError: Can't call numpy() on Tensor that requires
    grad. Use tensor.detach().numpy() instead.` The code crashes the first
    time it runs, typically at the end of an epoch or in a plotting helper.

    ## Example
    ```python
    import torch

    def predict_proba(model, x):
        model.eval()
        probs = torch.softmax(model(x), dim=-1)
        return probs.cpu().numpy()
    ```

    Use instead:
    ```python
    import torch

    def predict_proba(model, x):
        model.eval()
        probs = torch.softmax(model(x), dim=-1)
        return probs.detach().cpu().numpy()
    ```

    ## Not flagged
    - Code under `torch.no_grad()`, `torch.inference_mode()` or
      `torch.set_grad_enabled(False)`, or in a function decorated with them
      or only called under them in the same file.
    - Tensors known to be detached: `.detach()`, `.data`, `.item()`.
    - Tensors created without grad: data batches, factories without
      `requires_grad=True`, integer results such as `out.argmax(1)`.
    - `.numpy(force=True)`, which detaches itself (torch 1.13 and later).
    - Code that runs only with autograd off: under `if not
      torch.is_grad_enabled():`, or after a guard that stops otherwise.
    - Outputs of a model whose class freezes all its parameters in its own
      `__init__`, computed from data.
    - A call inside a `try` that catches `RuntimeError` (or any exception):
      the code expects the refusal and handles it.
    - A helper's argument detached on some path before the call
      (`if x.requires_grad: x = x.detach()`), or passed only under no_grad.
    - `np.sum(t)`, `np.mean(t)` and the like on a single tensor: NumPy hands
      it to the tensor's own method instead of converting it.
    - NumPy functions on what a "model" fed NumPy arrays returns
      (`self.unet(sample=x.cpu().numpy())` in an ONNX pipeline): arrays.
    - An entry of a module's output whose `forward` (in the same file)
      builds it without graph: `out["boxes"]` made from `topk` indices.
    - What a model's own methods return (`agent.get_action(obs)` usually
      samples or takes an argmax), and a model built from a class passed in
      (`agent = Model(envs)` is an instance, not an output).
    - Test code.

    ## Fix safety
    The fix rewrites `x.numpy()` and `x.cpu().numpy()` as
    `x.detach().cpu().numpy()`. It is safe: the original call always
    raises, and the new one returns the values it was meant to return
    (`.cpu()` is a no-op for a tensor already on the CPU).

    ## Verification
    The probe runs the code with synthesized inputs and records each
    `.numpy()` called from the finding's statement (`np.sum` and
    `np.asarray` of tensors call it too): confirmed when it raises "Can't
    call numpy() on Tensor that requires grad"; refuted when its tensor did
    not require grad, also in a second run with the synthesized inputs
    requiring grad (a tensor that then requires grad depends on what the
    callers pass: inconclusive). Code that cannot run is inconclusive, with
    the reason.

    ## References
    - PyTorch docs, `torch.Tensor.numpy`: "force" and tensors that require grad.
    """

    code = "DL402"
    name = "numpy-on-requires-grad"
    fix_title = "Detach before `.numpy()`: `.detach().cpu().numpy()`"
    message = "`{call}` raises \"Can't call numpy() on Tensor that requires grad\": `{tensor}` is still part of the autograd graph"
    harm = "raises"
    default_enabled = True

    valid = [
        # Another module's helper returns what it returns: maybe an array already.
        """
        import numpy as np
        import torch
        from torchvision import models
        from guided_backprop import GuidedBackprop

        net = models.resnet18()
        saliency = GuidedBackprop(net).generate_gradients(torch.rand(1, 3, 32, 32), 3)
        shown = np.moveaxis(saliency, 0, -1)
        """,
        # Kept only when autograd is off.
        """
        import torch
        from torch import nn

        class Classifier(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(16, 4)
                self.scores = []

            def forward(self, x):
                logits = self.fc(x)
                if not torch.is_grad_enabled():
                    self.scores.append(logits.softmax(-1).numpy())
                return logits
        """,
        # A teacher frozen by its own constructor.
        """
        import numpy as np
        import torch
        from torch import nn

        class Teacher(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(16, 4)
                self.requires_grad_(False)

            def forward(self, x):
                return self.fc(x)

        teacher = Teacher()
        rows = [teacher(x).softmax(-1).numpy() for x in torch.randn(3, 2, 16)]
        np.save("soft_labels.npy", np.concatenate(rows))
        """,
        # Indices of a max/topk are integers: they never require grad.
        """
        import torch

        def predictions(model, images):
            output = model(images)
            _, preds_tensor = torch.max(output, 1)
            top5 = output.topk(5)[1]
            return preds_tensor.numpy(), top5.numpy()
        """,
        # Token ids: argmax plus an offset carries no graph.
        """
        def decode(model, input_ids, vocab_size):
            logits = model(input_ids).logits
            start_index = vocab_size - 256
            token_ids = logits[..., -256:].argmax(dim=-1) + start_index
            return token_ids.cpu().numpy()
        """,
        # Under no_grad.
        """
        import torch

        def predict(model, x):
            with torch.no_grad():
                return model(x).cpu().numpy()
        """,
        # Detached first.
        """
        import torch.nn.functional as F

        def train_step(model, x, y, optimizer, log):
            out = model(x)
            loss = F.mse_loss(out, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            log(out.detach().cpu().numpy(), loss.item())
        """,
        # Tensors without grad: data and integer results.
        """
        import torch

        def confusion(model, loader):
            preds, labels = [], []
            for x, y in loader:
                out = model(x)
                preds.append(out.argmax(dim=1).cpu().numpy())
                labels.append(y.numpy())
            return preds, labels
        """,
        # force=True detaches itself.
        """
        import torch

        def embed(encoder, x):
            return encoder(x).numpy(force=True)
        """,
        # A unittest case.
        """
        import unittest
        import torch
        from torch import nn

        class LinearTest(unittest.TestCase):
            def test_output(self):
                layer = nn.Linear(2, 2)
                out = layer(torch.ones(1, 2))
                self.assertEqual(out.numpy().shape, (1, 2))
        """,
        # Decorated with inference_mode.
        """
        import torch

        @torch.inference_mode()
        def features(backbone, images):
            return backbone(images).flatten(1).numpy()
        """,
        # An agent built from a class passed in; its action comes from a sample.
        """
        import torch

        def evaluate(model_path, envs, Model: torch.nn.Module, episodes=10):
            agent = Model(envs)
            agent.load_state_dict(torch.load(model_path))
            agent.eval()
            obs = envs.reset()
            for _ in range(episodes):
                actions, _, _ = agent.get_action_and_value(torch.Tensor(obs))
                obs = envs.step(actions.cpu().numpy())
        """,
        # An ONNX model: fed arrays, it returns arrays.
        """
        import numpy as np
        import torch

        class OnnxPipeline:
            def __call__(self, latents, timestep, embeds):
                latent_input = torch.cat([latents] * 2).cpu().numpy()
                noise_pred = self.unet(sample=latent_input, timestep=timestep, encoder_hidden_states=embeds)[0]
                uncond, text = np.split(noise_pred, 2)
                return uncond + 7.5 * (text - uncond)
        """,
        # The refusal is expected and handled.
        """
        import torch

        def as_array(model, x):
            out = model(x)
            try:
                return out.numpy()
            except RuntimeError:
                return out.detach().numpy()
        """,
        # A helper that detaches what it is given when needed.
        """
        import numpy as np
        import torch

        def to_image(t):
            if t.requires_grad:
                t = t.detach()
            return (t.cpu().numpy() * 255).astype(np.uint8)

        def show(model, x):
            return to_image(model(x))
        """,
        # A single tensor: np.mean calls the tensor's own mean.
        """
        import numpy as np
        import torch

        def summary(model, x):
            with torch.no_grad():
                out = model(x)
            return np.mean(out.numpy())
        """,
        # The forward of the file builds this entry from integer indices.
        """
        import torch
        from torch import nn

        class Detector(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = nn.Linear(8, 1)

            def forward(self, feats):
                scores = self.head(feats).flatten()
                idx = scores.topk(3).indices
                boxes = torch.stack([idx, idx + 1], 1).float() * 4
                return [{"boxes": boxes, "scores": scores}]

        def show(feats):
            model = Detector()
            model.eval()
            out = model(feats)[0]
            return out["boxes"].cpu().numpy()
        """,
    ]

    invalid = [
        # A helper's argument, passed in with its graph by the training loss.
        Invalid(
            """
            import numpy as np
            import torch
            import torch.nn.functional as F

            def is_rotation(mat):
                det = np.linalg.det(mat.cpu().numpy())
                return bool(abs(det - 1.0).max() < 1e-4)

            def rotation_loss(pred, target):
                assert is_rotation(pred)
                return F.mse_loss(pred, target)

            def train(net, loader, opt):
                for x, target in loader:
                    loss = rotation_loss(net(x), target)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            """,
            line=6,
            message="`mat` is still part of the autograd graph",
        ),
        # A history of loss tensors converted by NumPy.
        Invalid(
            """
            import numpy as np
            import torch
            from torch import nn

            class Learner:
                def __init__(self, net: nn.Module):
                    self.net = net
                    self.loss_func = nn.MSELoss()
                    self.optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
                    self.cost_his = []

                def learn(self, x, y):
                    loss = self.loss_func(self.net(x), y)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
                    self.cost_his.append(loss)

                def plot_cost(self):
                    return np.arange(len(self.cost_his)), np.asarray(self.cost_his)
            """,
            line=20,
            message="`np.asarray(self.cost_his)` raises",
        ),
        # The entry the forward builds from the head's scores keeps the graph.
        Invalid(
            """
            import torch
            from torch import nn

            class Detector(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.head = nn.Linear(8, 1)

                def forward(self, feats):
                    scores = self.head(feats).flatten()
                    idx = scores.topk(3).indices
                    return [{"boxes": idx.float() * 4, "scores": scores}]

            def show(feats):
                model = Detector()
                model.eval()
                out = model(feats)[0]
                return out["boxes"].cpu().numpy(), out["scores"].cpu().numpy()
            """,
            line=18,
            message="`out[\"scores\"]` is still part of the autograd graph",
        ),
        Invalid(
            """
            import torch

            def predict_proba(model, x):
                model.eval()
                probs = torch.softmax(model(x), dim=-1)
                return probs.cpu().numpy()
            """,
            line=6,
            column=12,
            message="`probs.cpu().numpy()` raises",
            fixed="""
            import torch

            def predict_proba(model, x):
                model.eval()
                probs = torch.softmax(model(x), dim=-1)
                return probs.detach().cpu().numpy()
            """,
        ),
        Invalid(
            """
            from torch import nn

            def export_weights(model: nn.Module):
                arrays = []
                for p in model.parameters():
                    arrays.append(p.numpy())
                return arrays
            """,
            line=6,
            fixed="""
            from torch import nn

            def export_weights(model: nn.Module):
                arrays = []
                for p in model.parameters():
                    arrays.append(p.detach().cpu().numpy())
                return arrays
            """,
        ),
        Invalid(
            """
            import torch as th

            def fit(model, loader, criterion, optimizer, history):
                for x, y in loader:
                    loss = criterion(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    history.append(loss.numpy())
            """,
            line=9,
            message="`loss` is still part of the autograd graph",
        ),
        Invalid(
            """
            import torch

            noise = torch.randn(16, 100, requires_grad=True)
            image = noise.numpy()
            """,
            line=4,
        ),
    ]

    @property
    def _loops(self) -> LoopFacts:
        return self.facts.shared("loops", LoopFacts)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value != "numpy":
            self._check_numpy_function(node)
            return
        if any(arg.keyword is not None and arg.keyword.value == "force" for arg in node.args):
            return
        receiver = func.value
        facts = self.facts
        if not self._in_graph(receiver):
            return
        if facts.grad_mode.is_disabled(node) or facts.intent.is_test_code(node) or self._error_handled(node):
            return
        tensor = _without_cpu(receiver)
        detached = cst.Call(cst.Attribute(cst.Call(cst.Attribute(cst.Call(cst.Attribute(tensor, cst.Name("detach"))), cst.Name("cpu"))), cst.Name("numpy")))
        self.report(
            node,
            fix=Replace(node, detached),
            call=facts.module.code_for_node(node),
            tensor=facts.module.code_for_node(tensor),
        )

    def _error_handled(self, node: cst.Call) -> bool:
        """Inside a `try` whose handler catches the `RuntimeError` (or any
        exception): the code expects the refusal and deals with it."""
        index = self.facts.index
        for ancestor in index.ancestors(node):
            if isinstance(ancestor, (cst.FunctionDef, cst.ClassDef, cst.For, cst.While)):
                return False  # a refusal inside a loop the `try` wraps ends the loop
            if isinstance(ancestor, cst.Try) and index.is_inside(node, ancestor.body):
                for handler in ancestor.handlers:
                    caught = handler.type
                    names = [e.value for e in caught.elements] if isinstance(caught, cst.Tuple) else [caught]
                    if caught is None or any(dotted(n) in ("RuntimeError", "Exception", "BaseException") for n in names):
                        return True
        return False

    def _in_graph(self, tensor: cst.BaseExpression) -> bool:
        """In the graph where it is computed, or passed in so by a call of the file."""
        loops = self._loops
        interpreter = self.facts.interpreter
        if interpreter.in_graph(tensor):
            return True
        if interpreter.holds_no_graph(tensor):
            return False  # seen to hold data in every context it ran in
        return loops.carries_graph(tensor, GRAD) or loops.carries_graph_from_callers(tensor)

    def _check_numpy_function(self, node: cst.Call) -> None:
        """`np.sum(layers, 0)`, `np.asarray(self.cost_his)`: NumPy converts
        its tensor arguments with `Tensor.__array__`, which calls `.numpy()`."""
        qualified = self.facts.names.qualified(node.func) or ""
        if not qualified.startswith("numpy.") or qualified.startswith("numpy.random."):
            return
        last = qualified.rsplit(".", 1)[-1]
        facts = self.facts
        for arg in node.args:
            if arg.keyword is not None or arg.star:
                continue
            value = arg.value
            # A single tensor given to `np.sum`, `np.mean`, ... is handed to the
            # tensor's own method instead; lists of tensors are converted.
            if last in _DISPATCHED and not self._is_container(value):
                continue
            if not self._in_graph(value) or self._from_numpy_model(value) or facts.interpreter.made_by_unseen_code(value):
                continue
            if facts.grad_mode.is_disabled(node) or facts.intent.is_test_code(node) or self._error_handled(node):
                return
            code = facts.module.code_for_node
            self.report(node, call=code(node), tensor=code(value))
            return

    def _from_numpy_model(self, value: cst.BaseExpression, depth: int = 0) -> bool:
        """Output of a "model" called with NumPy arrays (`self.unet(sample=x.numpy())`
        of an ONNX pipeline): no torch module takes them, so it returns arrays."""
        if depth > 12:
            return False
        again = lambda inner: self._from_numpy_model(inner, depth + 1)  # noqa: E731
        if isinstance(value, (cst.Subscript, cst.UnaryOperation)):
            return again(value.value if isinstance(value, cst.Subscript) else value.expression)
        if isinstance(value, cst.BinaryOperation):
            return again(value.left) or again(value.right)
        if isinstance(value, (cst.List, cst.Tuple)):
            return any(again(e.value) for e in value.elements)
        if isinstance(value, cst.Name):
            entry = self.facts.values.scope(value).assignment_before(value.value, value)
            return entry is not None and entry[2] is not None and again(entry[2])
        if isinstance(value, cst.Call):
            return any(self._is_numpy_array(arg.value) for arg in value.args)
        return False

    def _is_numpy_array(self, value: cst.BaseExpression, depth: int = 0) -> bool:
        """`x.cpu().numpy()`, `np.array(...)`, `image.astype(dtype)`, or a name bound to one."""
        if isinstance(value, cst.Name) and depth < 4:
            entry = self.facts.values.scope(value).assignment_before(value.value, value)
            return entry is not None and entry[2] is not None and self._is_numpy_array(entry[2], depth + 1)
        if not isinstance(value, cst.Call):
            return False
        if isinstance(value.func, cst.Attribute) and value.func.attr.value in ("numpy", "astype"):
            return True
        return (self.facts.names.qualified(value.func) or "").startswith("numpy.")

    def _is_container(self, value: cst.BaseExpression) -> bool:
        if isinstance(value, (cst.List, cst.Tuple, cst.ListComp)):
            return True
        if isinstance(value, (cst.Name, cst.Attribute)):
            index = self.facts.index
            key = dotted(value)
            scope = index.scope_of(value) if isinstance(value, cst.Name) else index.enclosing(value, cst.ClassDef)
            if scope is None or key is None:
                return False
            for assign in index.descendants(scope, cst.Assign):
                if isinstance(assign.value, (cst.List, cst.ListComp)) and any(dotted(t.target) == key for t in assign.targets):
                    return True
        return False
