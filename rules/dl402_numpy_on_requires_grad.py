from __future__ import annotations

import libcst as cst

from detachlint.analysis.loops import LoopFacts
from detachlint.analysis.values import GRAD
from detachlint.rule import Invalid, Replace, Rule


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
    outside any no-grad region.

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
    The probe runs the expression on synthesized inputs and shows the
    `RuntimeError` "Can't call numpy() on Tensor that requires grad".

    ## References
    - PyTorch docs, `torch.Tensor.numpy`: "force" and tensors that require grad.
    """

    code = "DL402"
    name = "numpy-on-requires-grad"
    fix_title = "Detach before `.numpy()`: `.detach().cpu().numpy()`"
    message = "`{call}` raises \"Can't call numpy() on Tensor that requires grad\": `{tensor}` is still part of the autograd graph"
    severity = "error"
    default_enabled = True

    valid = [
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
    ]

    invalid = [
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
            return
        if any(arg.keyword is not None and arg.keyword.value == "force" for arg in node.args):
            return
        receiver = func.value
        facts = self.facts
        if not self._loops.carries_graph(receiver, GRAD):
            return
        if facts.grad_mode.is_disabled(node) or facts.intent.is_test_code(node):
            return
        tensor = _without_cpu(receiver)
        detached = cst.Call(cst.Attribute(cst.Call(cst.Attribute(cst.Call(cst.Attribute(tensor, cst.Name("detach"))), cst.Name("cpu"))), cst.Name("numpy")))
        self.report(
            node,
            fix=Replace(node, detached),
            call=facts.module.code_for_node(node),
            tensor=facts.module.code_for_node(tensor),
        )
