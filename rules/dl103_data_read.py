from __future__ import annotations

import libcst as cst

from detachlint.analysis.inplace import InplaceEdits
from detachlint.analysis.tensors import TensorFacts, TensorKind
from detachlint.rule import Invalid, Rule


class DataRead(Rule):
    """`.data` on a tensor: an alias autograd does not check.

    ## What it does
    Flags every use of `.data` on a torch tensor that DL101 and DL102 leave
    alone: reads (`outputs.data`, `loss.data[0]`), and edits of parameters,
    gradients and other tensors through `.data` (`p.data.add_(...)`,
    `m.weight.data.normal_()`). A style rule, off by default: enable it with
    `--select DL103` or `extend-select`.

    ## Why is this bad?
    `x.data` returns a tensor that shares `x`'s storage but not its version
    counter. Nothing goes wrong while it is only read; but an in-place edit
    through it, now or after a later refactor, is invisible to autograd, and
    backward computes silently wrong gradients where the same edit through
    `x.detach()` raises "modified by an inplace operation". `.detach()` for
    reads and `torch.no_grad()` for updates say the same thing safely; `.data`
    is kept in torch only for old code.

    ## Example
    ```python
    import torch

    def accuracy(model, images, labels):
        outputs = model(images)
        _, predicted = torch.max(outputs.data, 1)
        return (predicted == labels).float().mean()
    ```

    Use instead:
    ```python
    import torch

    def accuracy(model, images, labels):
        outputs = model(images)
        _, predicted = torch.max(outputs.detach(), 1)
        return (predicted == labels).float().mean()
    ```

    ## Not flagged
    - `.data` on things that are not tensors when the analysis can tell:
      a dataset's `.data` (a numpy array or a list), a `DataLoader` batch
      object, numpy arrays, PyG `Data`, `self.data` of a plain class.
    - The `.data` field of a `PackedSequence` (`pack_padded_sequence(...).data`
      and what an RNN returns for a packed input).
    - Rebinding `x.data = t`, which DL102 judges.
    - In-place edits of activations through `.data`, which DL101 judges.
    - `.data` on values the analysis cannot place, such as a function
      argument of unknown type.

    ## Fix safety
    No automatic fix: `.detach()` and `torch.no_grad()` each fit some uses;
    which one is the author's call.

    ## Verification
    The probe runs the enclosing code with the `.data` access replaced by
    `.detach()` and reports whether any edit through it now raises "modified
    by an inplace operation" (a hidden hazard) or nothing changes (style).

    ## References
    - PyTorch 0.4 migration guide: "What about `.data`?" (`.detach()` is the
      safer replacement).
    - PyTorch issue #30987, "Remove `.data`".
    """

    code = "DL103"
    name = "data-read"
    message = "`{name}.data` shares `{name}`'s storage with autograd's version check off: an in-place edit through it goes unnoticed and backward silently computes wrong gradients, where `.detach()` would raise"
    severity = "warning"
    default_enabled = False

    valid = [
        # A torchvision dataset's `.data` is a numpy array; numpy's own `.data` is a buffer.
        """
        import numpy as np
        import torchvision

        train_set = torchvision.datasets.CIFAR10("data", train=True, download=True)
        mean = train_set.data.mean(axis=(0, 1, 2)) / 255
        buffer = np.zeros(3).data
        """,
        # A batch object from a DataLoader (PyG `Batch`, a dataclass).
        """
        import torch

        def train(model, loader, optimizer):
            for batch in loader:
                out = model(batch.data, batch.edge_index)
                loss = out.mean()
                loss.backward()
                optimizer.step()
        """,
        # Plain objects with a `data` attribute.
        """
        import torch

        class Vocab:
            def __init__(self, tokens):
                self.data = sorted(tokens)

            def __len__(self):
                return len(self.data)
        """,
        # The `data` field of a PackedSequence.
        """
        import torch
        from torch.nn.utils.rnn import pack_padded_sequence

        def caption_loss(scores, targets, lengths, criterion):
            scores = pack_padded_sequence(scores, lengths, batch_first=True).data
            targets = pack_padded_sequence(targets, lengths, batch_first=True).data
            return criterion(scores, targets)
        """,
        # An RNN's output for a packed input is a PackedSequence too.
        """
        import torch
        from torch.nn.utils import rnn

        def encode(lstm, embedded, lengths):
            packed = rnn.pack_padded_sequence(embedded, lengths, batch_first=True)
            output, (h, c) = lstm(packed)
            return output.data, h
        """,
        # Rebinding: DL102's.
        """
        import torch

        def train(model, loader, criterion, lr=0.1):
            for x, y in loader:
                loss = criterion(model(x), y)
                loss.backward()
                for p in model.parameters():
                    p.data = torch.zeros_like(p)
        """,
        # An in-place edit of an activation through `.data`: DL101's.
        """
        import torch

        def train_step(model, x, y, criterion):
            prob = torch.sigmoid(model(x))
            prob.data.clamp_(0.05, 0.95)
            loss = criterion(prob, y)
            loss.backward()
        """,
        # A function argument of unknown type.
        """
        import torch

        def to_numpy(x):
            return x.data.cpu().numpy()
        """,
    ]

    invalid = [
        Invalid(
            """
            import torch

            def evaluate(model, loader):
                correct = 0
                for images, labels in loader:
                    outputs = model(images)
                    _, predicted = torch.max(outputs.data, 1)
                    correct += (predicted == labels).sum().item()
                return correct
            """,
            line=7,
            column=34,
            message="`outputs.data` shares `outputs`'s storage",
        ),
        # Classic parameter edits in an optimizer's step: two `.data` uses.
        Invalid(
            """
            import torch

            class PlainSGD(torch.optim.Optimizer):
                def step(self, closure=None):
                    for group in self.param_groups:
                        for p in group["params"]:
                            p.data.add_(p.grad.data, alpha=-group["lr"])
            """,
            line=7,
            message="`p.grad.data`",
        ),
        # Weight init through `.data`.
        Invalid(
            """
            from torch import nn

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(4, 2)
                    self.fc.weight.data.normal_(0.0, 0.02)
            """,
            line=7,
            message="`self.fc.weight.data`",
        ),
        # Old-style loss logging.
        Invalid(
            """
            import torch.nn.functional as F

            def train(model, loader, optimizer):
                running = 0.0
                for x, y in loader:
                    loss = F.cross_entropy(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    running += loss.data.item()
                return running
            """,
            line=10,
            message="`loss.data`",
        ),
    ]

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "data":
            return
        facts = self.facts
        if isinstance(facts.index.parent(node), cst.AssignTarget):
            return  # `x.data = t`: DL102
        kind = facts.shared("tensors", TensorFacts).kind(node.value)
        if kind is None:
            return
        if kind is TensorKind.ACTIVATION and self._edited(node):
            return  # an edit of an activation: DL101
        name = facts.module.code_for_node(node.value)
        if len(name) > 40 or "\n" in name:
            name = name.split("\n", 1)[0][:37] + "..."
        self.report(node, name=name)

    def _edited(self, node: cst.Attribute) -> bool:
        edits = self.facts.shared("inplace", InplaceEdits)
        parent = self.facts.index.parent(node)
        return edits.edit_of(node) is not None or (
            isinstance(parent, cst.Subscript) and parent.value is node and edits.edit_of(parent) is not None
        )
