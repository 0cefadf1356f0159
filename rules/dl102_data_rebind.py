from __future__ import annotations

from typing import Optional

import libcst as cst

from detachlint.analysis.priors import FROZEN_BY_NAME
from detachlint.analysis.phases import StepPhases
from detachlint.analysis.tensors import TensorFacts, TensorKind
from detachlint.analysis.values import Holds
from detachlint.rule import Invalid, Replace, Rule

_SWAPS = "`{name}.data = ...` swaps the storage under `{name}` behind autograd's back"
_RESIZES_ALIAS = "`{name}.data.{method}(...)` resizes only the alias `.data` returns"
_RESIZES = ("resize_", "resize_as_")
_STALE = "`{name}` keeps its old shape, and its old values where the copy did not reach"
_RESHAPED = "autograd and the optimizer still expect the old shape, so the next backward raises 'invalid gradient' or the optimizer's state no longer fits"
_ACTIVATION = "backward runs on the new values without noticing, so its gradients come out silently wrong"
_PARAMETER = "optimizer state and views of the old storage keep the old tensor, and a change of shape or dtype goes unnoticed until it breaks"


class DataRebind(Rule):
    """Assigning to `.data` swaps a tensor's storage behind autograd's back.

    ## What it does
    Flags `x.data = t` where `x` is a tensor autograd works with, in code
    that runs on every step: a parameter rebound in `forward`, in an
    optimizer's `step`, or in a training loop (after or around
    `loss.backward()` / `optimizer.step()`), and an activation rebound while
    later code still uses it or values computed from it.

    Also flags a parameter rebound to a tensor of another shape (a slice,
    `torch.index_select`, a new tensor of a given size: pruning, thinning,
    growing a layer) in a function of the file that runs while the model
    trains: called from a training loop, from code after an optimizer was
    built, or between a forward and a backward, also as a method of the model
    (`net.prune()`) or as a callback handed to another object.

    And flags `x.data.resize_(...)` (and `resize_as_`): the resize applies to
    the alias `.data` returns, not to `x`.

    Off by default: on real code (torch, transformers, timm, lightning,
    diffusers, stable-baselines3 and 25 more packages) its four findings were
    working idioms, a manual SGD update and a NaN repair of an optimized leaf
    through `x.data = ...`, where none of the consequences below happened.
    Enable it (`--extend-select DL102`) to keep `.data =` out of a codebase.

    ## Why is this bad?
    `x.data.resize_(n).copy_(t)`, the torch 0.3 idiom for refilling a
    placeholder, resizes only the temporary `.data` returns since torch 0.4:
    `x` keeps its old shape, and where the new batch is smaller, old values.

    `x.data = t` replaces the storage under `x` and tells nobody. Tensors
    autograd saved for backward are swapped too, without a version bump, so
    backward silently uses the new values. A parameter autograd has met
    keeps its old shape in autograd's records: after a rebinding to another
    shape the next backward raises "returned an invalid gradient ... expected
    shape compatible with [old shape]". Optimizer state (Adam's moments),
    views of the old storage and anything else that held it keep the old
    tensor, and a new shape, dtype or device is accepted without a word until
    something breaks later, far from the cause.

    ## Example
    ```python
    import torch

    def train(model, loader, criterion, lr=0.1):
        for x, y in loader:
            loss = criterion(model(x), y)
            model.zero_grad()
            loss.backward()
            for p in model.parameters():
                p.data = p.data - lr * p.grad
    ```

    Use instead:
    ```python
    import torch

    def train(model, loader, criterion, lr=0.1):
        for x, y in loader:
            loss = criterion(model(x), y)
            model.zero_grad()
            loss.backward()
            with torch.no_grad():
                for p in model.parameters():
                    p -= lr * p.grad
    ```

    ## Not flagged
    - Rebinding in `__init__`, `reset_parameters` or `_init_weights`, before
      the module is used.
    - Loading, conversion and re-parameterisation helpers (copying
      pretrained weights, fusing branches into one conv, padding a bias to a
      resized vocabulary), which run once, outside training steps.
    - A reshaping helper called only while the model is built, before any
      optimizer or forward (`prune(model)` right after `Net()`).
    - Device and dtype moves of parameters (`p.data = p.data.half()`) in
      setup code.
    - Updates of EMA, target, teacher or momentum copies
      (`for p_t, p in zip(target.parameters(), net.parameters())`), which are
      updated without gradients by design.
    - Leaf inputs updated between steps, such as an adversarial `delta`.
    - Anything under `torch.no_grad()` or `torch.inference_mode()`, or in a
      function decorated with them (weight clipping).
    - An activation that nothing reads after the rebinding.
    - `.data` attributes of things that are not tensors (`self.data = ...`,
      `dataset.data = ...`, an options object's `opt.data`).

    ## Fix safety
    For a parameter, the fix copies into the existing storage:
    `p.data = t` becomes `with torch.no_grad(): p.copy_(t)`. It is unsafe:
    `copy_` keeps `p`'s shape, dtype and device (it casts `t`, broadcasts it,
    or raises where the rebinding silently changed them), and code that relied
    on `p` sharing `t`'s storage no longer does. Only a statement standing
    alone on its line is rewritten. Activations get no fix: which value later
    code should see is the author's call.

    ## Verification
    The probe runs the code with synthesized inputs and reads the tensor
    just before and after the statement. For `.data.resize_`: confirmed
    when the alias took the new shape while the tensor kept its old one. For
    a parameter: its shape, dtype and storage before and after, whether
    another tensor still holds the old storage, and what a gradient through
    it right after the statement, the code's next backward or the
    optimizer's step raise ("invalid gradient", a size mismatch); refuted
    when it stays on its own storage, or when after a change of shape the
    next backward fills its `.grad` at the new shape. For an activation: the
    gradients of the backward that follows against a run without the
    rebinding, on the same loss; refuted when they are equal.

    ## References
    - PyTorch issue #30987, "Remove `.data`": `.data` does not share the
      version counter, so autograd's in-place checks do not see the change.
    - PyTorch pull request #33874: `param.data -= param.grad` becomes
      `with torch.no_grad(): param -= param.grad`.
    """

    code = "DL102"
    name = "data-rebind"
    fix_title = "Copy into the tensor under `torch.no_grad()`"
    message = "{what}: {consequence}"
    harm = "wrong-gradients"
    default_enabled = False

    valid = [
        # Copying pretrained weights in __init__.
        """
        import torch
        from torch import nn

        class TextClassifier(nn.Module):
            def __init__(self, vectors):
                super().__init__()
                self.embed = nn.Embedding(*vectors.shape)
                self.embed.weight.data = vectors
                self.fc = nn.Linear(vectors.shape[1], 2)
        """,
        # A re-parameterisation helper fuses branches once, after training.
        """
        import torch
        from torch import nn

        class RepConv(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv2d(c, c, 3, padding=1)
                self.reparam_conv = nn.Conv2d(c, c, 3, padding=1)

            def reparameterize(self):
                kernel, bias = self._fuse()
                self.reparam_conv.weight.data = kernel
                self.reparam_conv.bias.data = bias
        """,
        # A dtype move in setup code.
        """
        import torch

        def cast_to_half(model):
            for p in model.parameters():
                p.data = p.data.half()
            return model
        """,
        # Soft update of a target network inside the training loop.
        """
        import torch

        def train(q_net, target_net, loader, optimizer, tau=0.005):
            for s, a, r in loader:
                loss = (q_net(s).gather(1, a) - r).pow(2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                for p_t, p in zip(target_net.parameters(), q_net.parameters()):
                    p_t.data = tau * p.data + (1 - tau) * p_t.data
                for p_t in target_net.parameters():
                    p_t.data = p_t.data.clamp(-1, 1)
        """,
        # An adversarial perturbation: a leaf, updated between steps.
        """
        import torch

        def pgd(model, x, y, criterion, eps=0.03, alpha=0.01):
            delta = torch.zeros_like(x, requires_grad=True)
            for _ in range(10):
                loss = criterion(model(x + delta), y)
                loss.backward()
                delta.data = (delta.data + alpha * delta.grad.sign()).clamp(-eps, eps)
                delta.grad.zero_()
            return delta.detach()
        """,
        # WGAN weight clipping under no_grad.
        """
        import torch

        def train_critic(critic, loader, optimizer, clip=0.01):
            for real in loader:
                loss = -critic(real).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                with torch.no_grad():
                    for p in critic.parameters():
                        p.data = p.data.clamp(-clip, clip)
        """,
        # Nothing reads the activation afterwards.
        """
        import torch

        def log_features(model, x, writer):
            feats = model(x)
            writer.add_histogram("feats", feats.detach())
            feats.data = feats.data.cpu()
        """,
        # A pruning helper run once on a fresh model, before any forward or optimizer.
        """
        import torch
        from torch import nn

        def prune_inputs(layer, keep):
            layer.weight.data = layer.weight.data[:, :keep]
            layer.in_features = keep

        def main(loader, keep=90):
            model = nn.Sequential(nn.Linear(100, 10))
            prune_inputs(model[0], keep)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for x, y in loader:
                loss = nn.functional.mse_loss(model(x[:, :keep]), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
        # Padding a bias to a resized vocabulary while the model is built.
        """
        import torch
        from torch import nn

        class LMHead(nn.Module):
            def __init__(self, n_vocab, dim):
                super().__init__()
                self.decoder = nn.Linear(dim, n_vocab)

            def resize(self, n_vocab):
                bias = self.decoder.bias
                bias.data = nn.functional.pad(bias.data, (0, n_vocab - bias.shape[0]))

        def build(n_vocab, dim, extra):
            head = LMHead(n_vocab, dim)
            head.resize(n_vocab + extra)
            return head
        """,
        # `.data` of things that are not tensors.
        """
        import torch

        class Cache:
            def __init__(self):
                self.data = {}

        def subsample(dataset, idx, opt):
            dataset.data = dataset.data[idx]
            opt.data = str(opt.data)
            return dataset
        """,
    ]

    invalid = [
        Invalid(
            """
            import torch

            def train(model, loader, criterion, lr=0.1):
                for x, y in loader:
                    loss = criterion(model(x), y)
                    model.zero_grad()
                    loss.backward()
                    for p in model.parameters():
                        p.data = p.data - lr * p.grad
            """,
            line=9,
            column=13,
            message="`p.data = ...` swaps the storage under `p`",
            fixed="""
            import torch

            def train(model, loader, criterion, lr=0.1):
                for x, y in loader:
                    loss = criterion(model(x), y)
                    model.zero_grad()
                    loss.backward()
                    for p in model.parameters():
                        with torch.no_grad():
                            p.copy_(p.data - lr * p.grad)
            """,
        ),
        Invalid(
            """
            from torch import nn
            import torch.nn.functional as F

            class BinaryLinear(nn.Linear):
                def forward(self, x):
                    self.weight.data = self.weight.data.sign()
                    return F.linear(x, self.weight, self.bias)
            """,
            line=6,
            message="`self.weight.data = ...`",
            fixed="""
            from torch import nn
            import torch.nn.functional as F
            import torch

            class BinaryLinear(nn.Linear):
                def forward(self, x):
                    with torch.no_grad():
                        self.weight.copy_(self.weight.data.sign())
                    return F.linear(x, self.weight, self.bias)
            """,
        ),
        Invalid(
            """
            import torch.nn.functional as F

            def train_step(model, x, target, optimizer):
                pred = model(x)
                loss = F.mse_loss(pred, target)
                pred.data = pred.data.clamp(0, 1)
                loss.backward()
                optimizer.step()
            """,
            line=6,
            message="backward runs on the new values",
        ),
        Invalid(
            """
            import torch

            class SignSGD(torch.optim.Optimizer):
                def step(self, closure=None):
                    for group in self.param_groups:
                        for p in group["params"]:
                            if p.grad is not None:
                                p.data = p.data - group["lr"] * p.grad.sign()
            """,
            line=8,
        ),
        # A pruning method of the model, called from the training loop.
        Invalid(
            """
            import torch
            from torch import nn
            import torch.nn.functional as F

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc1 = nn.Linear(4, 6)
                    self.fc2 = nn.Linear(6, 2)

                def forward(self, x):
                    return self.fc2(F.relu(self.fc1(x)))

                def prune(self, keep):
                    self.fc1.weight.data = self.fc1.weight.data[:keep]
                    self.fc1.bias.data = self.fc1.bias.data[:keep]
                    self.fc2.weight.data = self.fc2.weight.data[:, :keep]

            def train(net, optimizer, loader):
                for i, (x, y) in enumerate(loader):
                    loss = F.cross_entropy(net(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    if i == 10:
                        net.prune(4)
            """,
            line=16,
            message="still expect the old shape",
        ),
        # A thinning callback handed to a policy after the optimizer was built.
        Invalid(
            """
            import torch

            def thin_channels(model, indices):
                for name, param in model.named_parameters():
                    if param.dim() == 4:
                        param.data = torch.index_select(param.data, 1, indices)

            class Thinner:
                def __init__(self, thinning_func):
                    self.thinning_func = thinning_func

                def on_epoch_end(self, model, indices):
                    self.thinning_func(model, indices)

            def run(model, train_epoch, indices, epochs=3):
                optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
                policy = Thinner(thin_channels)
                for epoch in range(epochs):
                    train_epoch(model, optimizer)
                    policy.on_epoch_end(model, indices)
            """,
            line=6,
        ),
        # Refilling a placeholder through `.data.resize_`: only the alias is resized.
        Invalid(
            """
            import torch

            image = torch.FloatTensor(64, 3, 32, 32)

            def load_batch(v, data):
                v.data.resize_(data.size()).copy_(data)

            def train_batch(net, criterion, optimizer, batch):
                images, labels = batch
                load_batch(image, images)
                loss = criterion(net(image), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """,
            line=6,
            message="resizes only the alias `.data` returns",
        ),
    ]

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1:
            return
        target = node.targets[0].target
        if not (isinstance(target, cst.Attribute) and target.attr.value == "data"):
            return
        facts = self.facts
        if facts.grad_mode.is_disabled(node):
            return
        owner = target.value
        name = facts.module.code_for_node(owner)
        what = _SWAPS.format(name=name)
        tensors = facts.shared("tensors", TensorFacts)
        kind = tensors.kind(owner)
        if kind is TensorKind.ACTIVATION and isinstance(owner, cst.Name) and self._used_later(owner.value, node):
            self.report(node, what=what, consequence=_ACTIVATION)
        elif kind is not TensorKind.PARAMETER or self._updated_copy(owner):
            return
        elif facts.shared("phases", StepPhases).runs_every_step(node):
            self.report(node, fix=self._copy_under_no_grad(node, owner), what=what, consequence=_PARAMETER)
        elif tensors.may_change_shape(node.value) and facts.shared("phases", StepPhases).runs_during_training(node):
            self.report(node, what=what, consequence=_RESHAPED)

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value in _RESIZES):
            return
        data = func.value
        if not (isinstance(data, cst.Attribute) and data.attr.value == "data"):
            return
        if self.facts.values.holds(data.value) & Holds.PACKED:
            return  # a PackedSequence's `.data` is the packed tensor itself
        name = self.facts.module.code_for_node(data.value)
        if len(name) > 40 or "\n" in name:
            return
        self.report(node, what=_RESIZES_ALIAS.format(name=name, method=func.attr.value), consequence=_STALE.format(name=name))

    def _used_later(self, name: str, node: cst.Assign) -> bool:
        statement = self.facts.index.parent(node) or node
        scope = self.facts.values.scope(node)
        return bool(scope.reads_after(name, statement)) or any(
            scope.reads_after(derived, statement) for derived in scope.derived_names(name, statement)
        )

    def _updated_copy(self, owner: cst.BaseExpression) -> bool:
        """A parameter of an EMA, target or teacher copy, or named like one."""
        module = self.facts.shared("tensors", TensorFacts).parameter_owner(owner) or ""
        parts = module.split(".") + ([owner.value] if isinstance(owner, cst.Name) else [])
        return any(FROZEN_BY_NAME.search(part) for part in parts if part)

    def _copy_under_no_grad(self, assign: cst.Assign, owner: cst.BaseExpression) -> Optional[Replace]:
        """`with torch.no_grad(): owner.copy_(value)` in place of a line holding only the assignment."""
        index = self.facts.index
        line = index.parent(assign)
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            return None
        if not isinstance(index.parent(line), (cst.IndentedBlock, cst.Module)):
            return None
        torch = self.facts.names.local_name("torch") or "torch"
        copy = cst.Expr(cst.Call(cst.Attribute(owner, cst.Name("copy_")), [cst.Arg(assign.value)]))
        wrapped = cst.With(
            items=[cst.WithItem(cst.parse_expression(f"{torch}.no_grad()"))],
            body=cst.IndentedBlock(body=[line.with_changes(body=[copy], leading_lines=())]),
            leading_lines=line.leading_lines,
        )
        return Replace(line, wrapped, unsafe=True, imports=("torch",))
