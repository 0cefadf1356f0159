from __future__ import annotations

import libcst as cst

from detachlint.analysis.vocabulary import DETACHING_METHODS
from detachlint.rule import Invalid, Rule


class BackwardOnDetached(Rule):
    """`backward()` on a value computed only from detached tensors, `.data` or constants.

    ## What it does
    Flags `x.backward()` (or `torch.autograd.backward(x)`) when every input
    of `x` is known to carry no graph: `.detach()` results, `.data`,
    numbers, tensors built with `torch.tensor(...)` and other factories,
    indices (`argmax`, `argmin`, `argsort`: a loss on the predicted classes),
    and values computed from those only. Values are followed through every
    assignment that may reach them, through containers (`losses = {}` and
    what is stored in it), through what the file's calls pass for a
    parameter, and into the functions and methods the file defines:
    `head.loss(feats)` or `self.model.loss(out)` on an object the file
    builds from its own class, a model's `forward` returning a dict of
    losses, a `sample()` method returning `logits.data`.
    Also flags the loss whose every term an `if`/`else` branch replaces by
    a constant tensor (`loss_bbox = torch.tensor(0.)` when a batch has no
    positive sample): on that path backward raises.

    ## Why is this bad?
    Such a value has no `grad_fn`: `backward()` raises `RuntimeError: element
    0 of tensors does not require grad and does not have a grad_fn`. A
    common source is rebuilding a loss from numbers (`torch.tensor(losses).sum()`
    after collecting `.item()` values) or detaching a prediction to log it
    and then computing the loss from the detached copy.

    ## Example
    ```python
    import torch

    def step(model, batches, optimizer):
        losses = []
        for x, y in batches:
            losses.append(((model(x) - y) ** 2).mean().item())
        loss = torch.tensor(losses).mean()
        loss.backward()
        optimizer.step()
    ```

    Use instead:
    ```python
    import torch

    def step(model, batches, optimizer):
        losses = []
        for x, y in batches:
            losses.append(((model(x) - y) ** 2).mean())
        loss = torch.stack(losses).mean()
        loss.backward()
        optimizer.step()
    ```

    ## Not flagged
    - A value with any input the analysis cannot see through (a parameter
      of the function, a call to a model or an unknown function): it may
      require grad.
    - A name assigned in a branch or a loop next to a value with graph
      (`loss = torch.zeros(())`, then `if step > 100: loss = model(x)...`):
      the constant is only a default.
    - A branch that keeps the graph of its zero loss
      (`loss_bbox = bbox_pred.sum() * 0`).
    - A tensor made by a factory and then filled with a module's outputs
      (`out = torch.zeros(n, t); out[:, i] = model(x[:, i])`): it requires
      grad from then on.
    - `.data` of a `PackedSequence`: the packed values, with their graph.
    - Values computed under `torch.no_grad()`: DL302 reports those.
    - Test code, which may check that the error is raised.

    ## Fix safety
    No fix: where the graph was lost (an `.item()`, a `.detach()`, a
    rebuilt tensor) is a decision about the training code.

    ## Verification
    The probe runs the code with synthesized inputs and watches the backward
    on the finding's line: confirmed when it raises "element 0 of tensors
    does not require grad", refuted when it runs without error.

    ## References
    - PyTorch docs, `torch.Tensor.backward` and `torch.Tensor.detach`.
    """

    code = "DL203"
    name = "backward-on-detached"
    message = "`{call}` raises \"element 0 of tensors does not require grad\"{path}: `{tensor}` is computed only from detached tensors, `.data`, indices or constants"
    harm = "raises"
    default_enabled = True

    valid = [
        # The zero loss of the no-positive branch keeps the graph.
        """
        import torch
        import torch.nn.functional as F

        def box_loss(pred, target, num_pos):
            if num_pos == 0:
                loss = pred.sum() * 0
            else:
                loss = F.l1_loss(pred, target)
            return loss

        def step(model, x, target, num_pos):
            box_loss(model(x), target, num_pos).backward()
        """,
        # A factory filled with a module's outputs requires grad.
        """
        import torch
        from torch import nn

        def train_step(model: nn.Module, y, target, loss_fn, optimizer):
            out = torch.zeros(y.size(0), 4, y.size(2))
            for t in range(y.size(2)):
                out[:, :, t] = model(y[:, :, t])
            loss = loss_fn(out, target)
            loss.backward()
            optimizer.step()

        train_step(nn.Linear(3, 4), torch.randn(2, 3, 5), torch.randn(2, 4, 5), nn.MSELoss(), None)
        """,
        # `.data` of a PackedSequence: the packed scores, with their graph.
        """
        import torch
        from torch.nn.utils.rnn import pack_padded_sequence

        def train(decoder, criterion, caps, lengths):
            scores = decoder(caps)
            scores = pack_padded_sequence(scores, lengths, batch_first=True).data
            targets = pack_padded_sequence(caps, lengths, batch_first=True).data
            loss = criterion(scores, targets)
            loss.backward()

        train(None, torch.nn.CrossEntropyLoss(), torch.zeros(2, 3), [3, 2])
        """,
        # stack keeps the graphs.
        """
        import torch

        def step(model, batches, optimizer):
            losses = [((model(x) - y) ** 2).mean() for x, y in batches]
            loss = torch.stack(losses).mean()
            loss.backward()
            optimizer.step()
        """,
        # A detached target, a live prediction.
        """
        import torch.nn.functional as F

        def step(model, target_model, x, optimizer):
            target = target_model(x).detach()
            loss = F.mse_loss(model(x), target)
            loss.backward()
            optimizer.step()
        """,
        # An unknown input: may require grad.
        """
        import torch

        def step(log_prob, advantage, optimizer):
            loss = -(log_prob * advantage.detach()).mean()
            loss.backward()
            optimizer.step()
        """,
        # Reassigned: not certain.
        """
        import torch

        def step(model, x, optimizer, warmup):
            loss = torch.zeros(())
            if not warmup:
                loss = model(x).sum()
            loss.backward()
        """,
    ]

    invalid = [
        # The helper detaches; the caller backpropagates what it returns.
        Invalid(
            """
            import torch
            from torch import nn

            def score(g, xb, yb):
                out = g(xb).detach()
                return ((out - yb) ** 2).mean()

            def fit(g, upd, batches):
                for xb, yb in batches:
                    upd.zero_grad()
                    value = score(g, xb, yb)
                    value.backward()
                    upd.step()

            if __name__ == "__main__":
                g = nn.Linear(3, 1)
                fit(g, torch.optim.Adam(g.parameters()), [(torch.randn(6, 3), torch.randn(6, 1))])
            """,
            line=12,
        ),
        Invalid(
            """
            import torch
            from torch import nn

            class Head(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.cls = nn.Linear(8, 3)
                    self.ce = nn.CrossEntropyLoss()

                def loss(self, feats, labels):
                    logits = torch.tensor(self.cls(feats))
                    losses = dict()
                    losses.update(loss_cls=self.ce(logits, labels))
                    return losses

            def parse_losses(losses):
                log_vars = {name: value.mean() for name, value in losses.items()}
                return sum(v for k, v in log_vars.items() if "loss" in k), log_vars

            def train_iter(backbone, head, images, labels, optimizer):
                loss, log_vars = parse_losses(head.loss(backbone(images), labels))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

            train_iter(nn.Linear(4, 8), Head(), torch.randn(2, 4), torch.tensor([0, 1]), None)
            """,
            line=23,
            message="`loss` is computed only from detached tensors",
        ),
        Invalid(
            """
            import torch
            import torch.nn.functional as F
            from torch import nn

            class DetHead(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.reg = nn.Linear(8, 4)

                def loss(self, pred, target, num_pos):
                    if num_pos == 0:
                        loss_bbox = torch.tensor(0.0)
                        loss_iou = torch.tensor(0.0)
                    else:
                        loss_bbox = F.l1_loss(pred, target)
                        loss_iou = (pred - target).abs().mean()
                    return loss_bbox + loss_iou

            class Trainer:
                def __init__(self, head):
                    self.head = head

                def step(self, feats, target, num_pos):
                    loss = self.head.loss(self.head.reg(feats), target, num_pos)
                    loss.backward()

            Trainer(DetHead()).step(torch.randn(2, 8), torch.randn(2, 4), 0)
            """,
            line=25,
            message="when `num_pos == 0`",
        ),
        Invalid(
            """
            import torch

            def step(model, batches, optimizer):
                losses = []
                for x, y in batches:
                    losses.append(((model(x) - y) ** 2).mean().item())
                loss = torch.tensor(losses).mean()
                loss.backward()
                optimizer.step()
            """,
            line=8,
            column=5,
            message="`loss` is computed only from detached tensors",
        ),
        Invalid(
            """
            import torch.nn.functional as F

            def train_step(model, x, y, optimizer):
                pred = model(x).detach()
                loss = ((pred - y.data) ** 2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """,
            line=7,
        ),
        Invalid(
            """
            import torch

            def penalty_step(model, optimizer):
                weights = [p.detach() for p in model.parameters()]
                norm = torch.zeros(1)
                torch.autograd.backward(norm * 0.1)
            """,
            line=6,
        ),
        # A loss on the predicted classes: `argmax` gives indices, which carry no graph.
        Invalid(
            """
            import torch
            from torch import nn

            model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 4))
            loss_fn = nn.MSELoss()
            optimiser = torch.optim.SGD(model.parameters(), lr=0.1)

            def train(x, y, epochs=3):
                for epoch in range(epochs):
                    preds = torch.softmax(model(x), dim=1).argmax(dim=1).type(torch.float32)
                    loss = loss_fn(preds, y)
                    optimiser.zero_grad()
                    loss.backward()
                    optimiser.step()

            train(torch.randn(32, 2), torch.randint(0, 4, (32,)).float())
            """,
            line=13,
            message="`loss` is computed only from detached tensors, `.data`, indices or constants",
        ),
    ]

    def _seen_cut(self, tensor: cst.BaseExpression) -> bool:
        """The interpreter saw `tensor` hold, in every context it ran in, a
        value with no graph left, whose graphs were all dropped by `.detach()`,
        `.data`, or a copy into Python or into a new tensor."""
        facts = self.facts
        interpreter = facts.interpreter
        value = interpreter.value_of(tensor)
        if value is None or value.opaque or not value.cuts or value.leaf or interpreter.in_graph_value(value):
            return False  # unknown, never cut, made a leaf that requires grad (`l.requires_grad = True`), or live
        for cut in value.cuts:
            if isinstance(cut, cst.Attribute) and cut.attr.value == "data":
                continue
            if not isinstance(cut, cst.Call) or interpreter.grad_modes(cut) == {False}:
                return False  # no graph by autograd being off: DL302's and DL303's
            method = cut.func.attr.value if isinstance(cut.func, cst.Attribute) else None
            numpy = method == "numpy" or (facts.names.qualified(cut.func) or "").startswith("numpy.")
            if numpy and interpreter.dropped.get(cut):
                return False  # NumPy on a tensor with a graph raises there, before any backward: DL402's
            if method in DETACHING_METHODS or interpreter.cut_into_value(cut):
                continue  # `.detach()`, or into a number, an array, a new tensor or indices (`argmax`)
            return False
        return True

    def visit_Call(self, node: cst.Call) -> None:
        values = self.facts.values
        tensor = values.backward_target(node)
        if tensor is None:
            return
        path = ""
        if not values.computed_without_graph(tensor) and not self._seen_cut(tensor):
            block = values.across_calls.without_graph_on_branch(tensor)
            if block is None:
                return
            branch = self.facts.index.parent(block)
            if isinstance(branch, cst.If):
                path = f" when `{self.facts.module.code_for_node(branch.test)}` (line {self.facts.line_of(branch)})"
            else:
                path = f" when the `else` at line {self.facts.line_of(branch)} runs"
        if self.facts.grad_mode.is_disabled(node) or self.facts.intent.is_test_code(node):
            return  # DL302's case, or a test of the error
        self.report(
            node,
            call=self.facts.module.code_for_node(node),
            tensor=self.facts.module.code_for_node(tensor),
            path=path,
        )
