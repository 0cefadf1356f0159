from __future__ import annotations

from typing import Optional

import libcst as cst

from detachlint.analysis.graph_cuts import GraphCuts
from detachlint.analysis.loss_terms import LossTerms
from detachlint.analysis.tensors import TensorFacts, TensorKind
from detachlint.analysis.values import Holds
from detachlint.rule import Invalid, Replace, Rule


_IN_GRAPH = (TensorKind.PARAMETER, TensorKind.ACTIVATION, TensorKind.LEAF)
_ZERO_DIM = "indexes a 0-dim tensor: `{name}` is a scalar, so `[0]` raises \"invalid index of a 0-dim tensor\" (`{name}.item()` reads it)"
_STATE = "cuts the state the loop carries in `{name}`, which `forward` returns: the earlier steps get no gradient through it"
_KEPT = "is kept as `{alias}` in `{store}`, the same storage, not a copy: {what} rewrites `{name}` in place and the kept value with it"
_DEAD = "cuts the graph, so the loss term built from it is a constant: backward sends no gradient through it"
_SELF_WEIGHT = "cuts the graph of a factor that scales `{name}` itself: backward treats the factor as a constant and silently drops its share of the gradient"


class DataRead(Rule):
    """`.data` read where harm follows: a gradient silently cut, a 0-dim index, a live alias kept.

    ## What it does
    Flags a read of `x.data` on a torch tensor when the read does harm, not
    when it is only an old way of saying `.detach()`:

    - `loss.data[0]` on a 0-dim tensor: a loss, a full reduction
      (`x.sum()`, `x.norm(2)`), what a loss helper of the file returns, or a
      value `backward()` was called on with no `gradient`.
    - A factor computed from `x.data` that scales `x` itself in a loss or in
      what a module's `forward` returns (`pt = logpt.data.exp()`, then
      `(1 - pt) ** gamma * logpt`).
    - A loss term built only from the `.data` of a parameter or an
      activation and plain data, summed into a loss that is backpropagated
      (an L1 penalty on `p.data`).
    - A state a loop in `forward` rebinds to its own `.data`
      (`h = h.data.clone()`) while the loop writes graph values into it and
      `forward` returns it.
    - An alias `g = p.grad.data` (or `p.data`) kept where it outlives the call
      (`self.state[p]["previous_grad"] = g`) while the source is rewritten in
      place: by the next backward for a gradient, by a later in-place update
      for a parameter.

    On by default: it flags only reads whose harm follows in the code (on
    the real-code corpora, 18 findings, every one a real bug); the style
    question of `.data` versus `.detach()` it leaves alone.

    ## Why is this bad?
    `x.data` is `x` without its graph and without autograd's version check.
    Read into a loss, it silently turns part of the loss into a constant: the
    factor's or the penalty's share of the gradient is dropped and training
    runs on, optimising something else. Indexed with `[0]` on a 0-dim tensor
    it raises "invalid index of a 0-dim tensor" (since torch 0.4). Kept as a
    "previous" value, it is the live tensor, so it always equals the current
    one.

    ## Example
    ```python
    import torch.nn.functional as F

    def train(model, loader, optimizer):
        losses = []
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.data[0])
        return losses
    ```

    Use instead:
    ```python
    import torch.nn.functional as F

    def train(model, loader, optimizer):
        losses = []
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        return losses
    ```

    ## Not flagged
    - The classic idioms, where `.data` means "without autograd" and nothing
      is cut that should not be: an optimizer's `step` (`p.data.add_(...)`,
      `torch.zeros_like(p.data)`), weight init (`m.weight.data.normal_()`),
      logging and metrics (`torch.max(outputs.data, 1)`, `loss.data.item()`).
    - Deliberate stop-gradients: a target (`r + gamma * q_next.data`), a
      GAN's discriminator step on `netD(fake.data)`, truncated
      backpropagation between batches (`hidden = hidden.data`).
    - `.data[0]` of a tensor not known to be 0-dim (a batch, `labels.data[0]`).
    - A kept value that is a copy (`state["previous_grad"] = grad.clone()`).
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
    A 0-dim index `x.data[0]` becomes `x.item()`, which is safe: it reads
    the number torch 0.3's `x.data[0]` read from a 1-element loss, and
    where `x` holds more than one element it raises instead of reading
    another one. An index that is written to (`x.data[0] = v`) is not
    fixed. The other findings have no automatic fix: `.clone()`, dropping
    the `.data` or keeping it as a deliberate stop-gradient each fit some
    uses; which one is the author's call.

    ## Verification
    The probe runs the code with synthesized inputs. A 0-dim index:
    confirmed when the statement raises "invalid index of a 0-dim tensor",
    refuted when it runs through. A cut factor, penalty or loop state:
    confirmed when the tensor `.data` is read from requires grad at the line
    while the value built from the read does not, refuted when that value
    requires grad; when the synthesized inputs carry no graph, it runs again
    with inputs that require grad, a stand-in it names. A kept alias: after
    the run, whether the kept value shares the source's storage and was
    rewritten in place after it was stored (confirmed), or has its own
    storage (refuted).

    ## References
    - PyTorch 0.4 migration guide: "What about `.data`?" and "Using
      `.item()`" (indexing a 0-dim loss raises).
    - PyTorch issue #30987, "Remove `.data`".
    """

    code = "DL103"
    name = "data-read"
    fix_title = "Read the number with `.item()`"
    message = "`{name}.data` {consequence}"
    harm = "wrong-gradients"
    default_enabled = True

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
        # An optimizer's step: `p.data.add_(...)`, `torch.zeros_like(p.data)`.
        """
        import torch

        class MomentumSGD(torch.optim.Optimizer):
            def step(self, closure=None):
                for group in self.param_groups:
                    for p in group["params"]:
                        if p.grad is None:
                            continue
                        grad = p.grad.data
                        state = self.state[p]
                        if len(state) == 0:
                            state["buf"] = torch.zeros_like(p.data)
                        state["buf"].mul_(0.9).add_(grad)
                        p.data.add_(state["buf"], alpha=-group["lr"])
        """,
        # Weight init through `.data`.
        """
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
                self.fc.weight.data.normal_(0.0, 0.02)
                self.fc.bias.data.fill_(0)
        """,
        # Logging and metrics: `torch.max(outputs.data, 1)`, `loss.data.item()`.
        """
        import torch
        import torch.nn.functional as F

        def train(model, loader, optimizer):
            running, correct = 0.0, 0
            for x, y in loader:
                outputs = model(x)
                loss = F.cross_entropy(outputs, y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                running += loss.data.item()
                _, predicted = torch.max(outputs.data, 1)
                correct += (predicted == y).sum().item()
            return running, correct
        """,
        # A stop-gradient target: `r + gamma * q_next.data`.
        """
        import torch.nn.functional as F

        def dqn_update(q_net, optimizer, obs, actions, rewards, next_obs, gamma=0.99):
            q = q_net(obs).gather(1, actions).squeeze(1)
            q_next = q_net(next_obs).max(1)[0]
            target = rewards + gamma * q_next.data
            loss = F.smooth_l1_loss(q, target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """,
        # A GAN's discriminator step on `netD(fake.data)`.
        """
        import torch

        def d_step(netG, netD, criterion, optimizerD, real, noise):
            fake = netG(noise)
            out_real = netD(real)
            out_fake = netD(fake.data)
            errD = criterion(out_real, torch.ones_like(out_real)) + criterion(out_fake, torch.zeros_like(out_fake))
            optimizerD.zero_grad()
            errD.backward()
            optimizerD.step()
        """,
        # Truncated backpropagation between batches: `hidden = hidden.data`.
        """
        import torch
        from torch import nn

        def train(model: nn.Module, batches, criterion, optimizer, hidden):
            for x, y in batches:
                hidden = hidden.data
                output, hidden = model(x, hidden)
                loss = criterion(output, y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
        # `labels.data[0]`: a batch, not known to be 0-dim.
        """
        import torch

        def first_labels(model, loader):
            firsts = []
            for images, labels in loader:
                outputs = model(images)
                firsts.append((labels.data[0], outputs.data[0]))
            return firsts
        """,
        # A kept value that is a copy: `state["previous_grad"] = grad.clone()`.
        """
        import torch

        class DiffGrad(torch.optim.Optimizer):
            def step(self, closure=None):
                for group in self.param_groups:
                    for p in group["params"]:
                        grad = p.grad.data
                        state = self.state[p]
                        previous = state.get("previous_grad", torch.zeros_like(grad))
                        dfc = torch.sigmoid((previous - grad).abs())
                        state["previous_grad"] = grad.clone()
                        p.data.add_(grad * dfc, alpha=-group["lr"])
        """,
    ]

    invalid = [
        Invalid(
            """
            import torch
            import torch.nn.functional as F

            def train(loader, model, crit, optimizer):
                for feats, labels in loader:
                    optimizer.zero_grad()
                    loss = crit(model(feats), labels)
                    loss.backward()
                    optimizer.step()
                    train_loss = loss.data[0]
                    print("train_loss = %.6f" % train_loss)
            """,
            line=10,
            column=22,
            message="indexes a 0-dim tensor",
            fixed="""
            import torch
            import torch.nn.functional as F

            def train(loader, model, crit, optimizer):
                for feats, labels in loader:
                    optimizer.zero_grad()
                    loss = crit(model(feats), labels)
                    loss.backward()
                    optimizer.step()
                    train_loss = loss.item()
                    print("train_loss = %.6f" % train_loss)
            """,
        ),
        # A focal loss whose modulating factor is read through `.data`.
        Invalid(
            """
            import torch
            from torch import nn
            import torch.nn.functional as F

            class FocalLoss(nn.Module):
                def __init__(self, gamma=2.0):
                    super().__init__()
                    self.gamma = gamma

                def forward(self, logits, target):
                    logpt = F.log_softmax(logits, dim=1).gather(1, target.view(-1, 1)).view(-1)
                    pt = logpt.data.exp()
                    loss = -1 * (1 - pt) ** self.gamma * logpt
                    return loss.mean()
            """,
            line=12,
            message="scales `logpt` itself",
        ),
        # An L1 penalty on a parameter's `.data`: a constant.
        Invalid(
            """
            import torch
            from torch import nn

            class Decoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.topics = nn.Parameter(torch.randn(3, 12))

                def forward(self, theta):
                    return theta @ self.topics

            def train(model, loader, optimizer, l1=1e-3):
                for theta, x in loader:
                    recon = nn.functional.mse_loss(model(theta), x)
                    penalty = torch.norm(model.topics.data, p=1)
                    loss = recon + l1 * penalty
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            line=15,
            message="the loss term built from it is a constant",
        ),
        # A recurrent state cut between timesteps inside `forward`.
        Invalid(
            """
            import torch
            from torch import nn

            class StepLSTM(nn.Module):
                def __init__(self, n_in, n_hidden):
                    super().__init__()
                    self.cell = nn.LSTMCell(n_in, n_hidden)
                    self.n_hidden = n_hidden

                def forward(self, inputs, lengths):
                    state = inputs.new_zeros(inputs.size(0), self.n_hidden)
                    memory = inputs.new_zeros(inputs.size(0), self.n_hidden)
                    for t in range(inputs.size(1)):
                        alive = int((lengths > t).sum())
                        h, c = self.cell(inputs[:alive, t], (state[:alive], memory[:alive]))
                        state = state.data.clone()
                        memory = memory.data.clone()
                        state[:alive] = h
                        memory[:alive] = c
                    return state
            """,
            line=16,
            message="cuts the state the loop carries in `state`",
        ),
        # The previous gradient kept as an alias of `p.grad`.
        Invalid(
            """
            import torch
            from torch.optim.optimizer import Optimizer

            class DiffGrad(Optimizer):
                def step(self, closure=None):
                    for group in self.param_groups:
                        for p in group["params"]:
                            grad = p.grad.data
                            state = self.state[p]
                            previous = state.get("previous_grad", torch.zeros_like(grad))
                            dfc = torch.sigmoid((previous - grad).abs())
                            state["previous_grad"] = grad
                            p.data.add_(grad * dfc, alpha=-group["lr"])
            """,
            line=8,
            message='is kept as `grad` in `state["previous_grad"]`',
        ),
    ]

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value != "data":
            return
        facts = self.facts
        parent = facts.index.parent(node)
        owner = node.value
        if isinstance(parent, cst.AssignTarget) or facts.values.holds(owner) & Holds.PACKED:
            return  # `x.data = t` is DL102's; a PackedSequence's `.data` is a field
        name = facts.module.code_for_node(owner)
        if len(name) > 40 or "\n" in name:
            name = name.split("\n", 1)[0][:37] + "..."
        tensors = facts.shared("tensors", TensorFacts)
        if _indexes_first(node, parent) and tensors.is_scalar(owner):
            self.report(node, fix=self._item(parent, owner), name=name, consequence=_ZERO_DIM.format(name=name), harm="raises")
            return
        cuts = facts.shared("graph_cuts", GraphCuts)
        state = cuts.carried_state_cut(node)
        if state is not None:
            self.report(node, name=name, consequence=_STATE.format(name=name))
            return
        kind = tensors.kind(owner)
        if kind in (TensorKind.GRADIENT, TensorKind.PARAMETER) and isinstance(parent, cst.Assign) and parent.value is node:
            store = cuts.kept_alias(parent, owner, edited_by_autograd=kind is TensorKind.GRADIENT)
            if store is not None:
                alias = parent.targets[0].target.value  # type: ignore[attr-defined]
                what = "zeroing the gradient in place, or a backward accumulating into it," if kind is TensorKind.GRADIENT else "the update that follows"
                self.report(node, name=name, consequence=_KEPT.format(alias=alias, store=facts.module.code_for_node(store), name=name, what=what))
                return
        if kind in _IN_GRAPH and self._dead_term(node):
            self.report(node, name=name, consequence=_DEAD)
        elif kind is not None and isinstance(owner, cst.Name):
            # In the graph by use: the product reaches a loss or a forward's output.
            product = cuts.weighs_itself(node, owner.value)
            if product is not None and cuts.reaches_graph_output(product):
                self.report(node, name=name, consequence=_SELF_WEIGHT.format(name=name))

    def _item(self, index: cst.Subscript, owner: cst.BaseExpression) -> Optional[Replace]:
        """`x.data[0]` -> `x.item()`: torch 0.3's read of a 1-element loss as
        a number. Not where the index is written to (`x.data[0] = v`, `del`)."""
        value = index.slice[0].slice.value  # type: ignore[attr-defined]
        if not (isinstance(value, cst.Integer) and value.value == "0"):
            return None  # `[1]` raised in torch 0.3 too
        holder = self.facts.index.parent(index)
        if isinstance(holder, (cst.AssignTarget, cst.Del)) or (isinstance(holder, (cst.AugAssign, cst.AnnAssign)) and holder.target is index):
            return None
        return Replace(index, cst.Call(cst.Attribute(owner, cst.Name("item"))))

    def _dead_term(self, node: cst.Attribute) -> bool:
        """The cut value is a summand of a backpropagated loss, built from it
        and plain data only: a constant to autograd."""
        terms = self.facts.shared("loss_terms", LossTerms)
        return any(terms.backward_through_sum(terms.term(use)) is not None for use in terms.uses(node))


def _indexes_first(node: cst.Attribute, parent: cst.CSTNode) -> bool:
    """`x.data[0]`: an integer index straight on the `.data`."""
    if not (isinstance(parent, cst.Subscript) and parent.value is node and len(parent.slice) == 1):
        return False
    index = parent.slice[0].slice
    return isinstance(index, cst.Index) and isinstance(index.value, cst.Integer)
