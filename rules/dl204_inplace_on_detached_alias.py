from __future__ import annotations

import libcst as cst

from detachlint.analysis import Holds
from detachlint.analysis.aliases import StorageAliases
from detachlint.analysis.inplace import InplaceEdits, storage_path
from detachlint.analysis.saved_tensors import SavedTensors
from detachlint.rule import Invalid, Replace, Rule

_IN_GRAPH = Holds.ACTIVATION | Holds.LOSS
_NOT_ACTIVATION = Holds.PARAM | Holds.LEAF | Holds.DETACHED


class InplaceOnDetachedAlias(Rule):
    """In-place edit of `out.detach()`, which is still `out`'s storage.

    ## What it does
    Flags `c = out.detach()` followed by an in-place edit of `c`
    (`c.mul_(255)`, `c[i] = v`, `c += v`, `out=c`), when `out` is an
    activation that later code still uses: a loss, a return value, another
    operation. Also flags the other direction: `buf.detach()` (a buffer,
    `self.queue.detach()`) fed to a product that saves it for backward
    (`torch.einsum(eq, [q, self.queue.detach()])`, `q @ buf.detach()`),
    and `buf` then edited in place before backward, in the same function or
    in a method of the instance it calls (`self._dequeue_and_enqueue(k)`).

    ## Why is this bad?
    `detach()` returns a new tensor without a graph, but on the *same
    storage*: editing `c` edits `out`. Later uses of `out` see the edited
    values, so the loss or the output is silently wrong (the DQN target
    `target = q.detach(); target[i, a] = r` makes `q` equal to its own
    target and the loss zero). When autograd saved `out` for backward,
    backward raises "one of the variables needed for gradient computation
    has been modified by an inplace operation".

    ## Example
    ```python
    import torch.nn.functional as F

    def dqn_loss(q_net, states, actions, rewards):
        q = q_net(states)
        target = q.detach()
        target[range(len(actions)), actions] = rewards
        return F.mse_loss(q, target)
    ```

    Use instead:
    ```python
    import torch.nn.functional as F

    def dqn_loss(q_net, states, actions, rewards):
        q = q_net(states)
        target = q.detach().clone()
        target[range(len(actions)), actions] = rewards
        return F.mse_loss(q, target)
    ```

    ## Not flagged
    - A detached copy of a buffer in a product (`self.queue.clone().detach()`),
      a buffer only concatenated or added (`torch.cat`, `+` save nothing),
      or edited after the backward that used it.
    - A detached copy: `out.detach().clone()`, `out.clone().detach()`.
    - Out-of-place updates of the alias (`c = c * 255`).
    - An alias edited after the last use of `out` (visualisation after
      `backward()`), or only `out.shape`/`out.device` read afterwards.
    - Detached parameters, leaves and inputs (`w = self.weight.detach();
      w.clamp_(-1, 1)`): edits of them are updates by design.
    - `requires_grad_()` on the alias, which does not change its values
      (the start of an adversarial example).
    - `.cpu()`, `.numpy()` or `.to(...)` after `detach()`: copies on a GPU,
      aliases only on a CPU run, which the analysis cannot tell apart.
    - An in-place method on an advanced-indexing copy (`c[mask].zero_()`
      writes a temporary).
    - `out` bound again before it is next used.

    ## Fix safety
    The fix detaches a copy: `c = out.detach()` becomes
    `c = out.detach().clone()`. It is safe: `c` gets the same values, the
    edit no longer reaches `out`, and the only cost is one copy. In a
    product, `self.queue.detach()` becomes `self.queue.detach().clone()`:
    autograd saves the copy, which the later edit of the buffer leaves alone.

    ## Verification
    The probe runs the code up to the edit and compares `out` before and
    after it, then watches the first backward after it. Confirmed: that
    backward raises "modified by an inplace operation" (autograd had saved
    `out`), or its gradients differ from a second run where the alias is a
    copy (`c = c.clone()` before the edit). Refuted: the values did not
    change, or the gradients came out the same. Changed values with no
    backward after them to show an effect are inconclusive.

    ## References
    - PyTorch docs, `torch.Tensor.detach`: "Returned Tensor shares the same
      storage with the original one. In-place modifications on either of them
      will be seen".
    - PyTorch docs, "Autograd mechanics": in-place correctness checks.
    """

    code = "DL204"
    name = "inplace-on-detached-alias"
    fix_title = "Detach a copy with `.detach().clone()`"
    message = "`{edit}` also changes `{source}`, whose storage `{alias}` shares: later uses of `{source}` see the edited values, and backward raises if autograd saved it"
    harm = "wrong-gradients"
    default_enabled = True

    valid = [
        # The queue is copied before the product saves it.
        """
        import torch
        from torch import nn

        class MoCo(nn.Module):
            def __init__(self, encoder, dim=8, k=16):
                super().__init__()
                self.encoder = encoder
                self.register_buffer("queue", torch.randn(dim, k))

            @torch.no_grad()
            def _enqueue(self, keys):
                self.queue[:, : keys.shape[0]] = keys.T

            def forward(self, x, keys):
                q = self.encoder(x)
                logits = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])
                self._enqueue(keys)
                return logits
        """,
        # Concatenation saves nothing; the edit after it is harmless.
        """
        import torch

        def logits_with_bank(model, x, bank, keys):
            q = model(x)
            logits = torch.cat([q, bank.detach()], dim=0)
            bank[: keys.shape[0]] = keys
            return logits
        """,
        # Edited after the backward that used it.
        """
        import torch

        def step(model, x, bank, keys, optimizer):
            q = model(x)
            loss = (q @ bank.detach()).logsumexp(-1).mean()
            loss.backward()
            optimizer.step()
            bank[:, : keys.shape[0]] = keys.T
        """,
        # A detached copy.
        """
        import torch.nn.functional as F

        def dqn_loss(q_net, states, actions, rewards):
            q = q_net(states)
            target = q.detach().clone()
            target[range(len(actions)), actions] = rewards
            other = q.clone().detach()
            other.zero_()
            return F.mse_loss(q, target) + other.sum()
        """,
        # Out-of-place update of the alias.
        """
        import torch

        def train_step(model, x, y, criterion, writer):
            pred = model(x)
            image = pred.detach()
            image = image * 255
            writer.add_image("pred", image)
            return criterion(pred, y)
        """,
        # The edit comes after the last use of `pred`; only its shape is read later.
        """
        import torch

        def train_step(model, x, y, criterion, optimizer, writer):
            pred = model(x)
            loss = criterion(pred, y)
            loss.backward()
            optimizer.step()
            image = pred.detach()
            image.mul_(255).clamp_(0, 255)
            writer.add_image("pred", image)
            return pred.shape
        """,
        # A detached parameter, edited on purpose.
        """
        import torch
        from torch import nn

        class ClippedLinear(nn.Module):
            def __init__(self):
                super().__init__()
                self.weight = nn.Parameter(nn.init.xavier_uniform_(torch.empty(4, 4)))

            def forward(self, x):
                w = self.weight.detach()
                w.clamp_(-1, 1)
                return x @ self.weight
        """,
        # requires_grad_() does not change values.
        """
        import torch

        def saliency(model, x):
            emb = model.embed(x)
            inputs = emb.detach()
            inputs.requires_grad_()
            score = model.head(inputs).max()
            score.backward()
            return inputs.grad, emb
        """,
        # .cpu() copies on a GPU run.
        """
        import torch

        def log_predictions(model, x, y, criterion, writer):
            pred = model(x)
            image = pred.detach().cpu()
            image.mul_(255)
            writer.add_image("pred", image)
            return criterion(pred, y)
        """,
        # An in-place method on a copy made by a mask.
        """
        import torch

        def masked_stats(model, x, y, criterion):
            out = model(x)
            c = out.detach()
            c[c < 0].zero_()
            return criterion(out, y)
        """,
        # `out` is bound again before it is next used.
        """
        import torch

        def two_views(model, x1, x2):
            out = model(x1)
            c = out.detach()
            c.mul_(2)
            out = model(x2)
            return out, c
        """,
    ]

    invalid = [
        # A memory queue saved by einsum, overwritten by a method before backward.
        Invalid(
            """
            import torch
            from torch import nn

            class MoCo(nn.Module):
                def __init__(self, encoder, dim=8, k=16):
                    super().__init__()
                    self.encoder = encoder
                    self.register_buffer("queue", torch.randn(dim, k))

                @torch.no_grad()
                def _enqueue(self, keys):
                    self.queue[:, : keys.shape[0]] = keys.T

                def forward(self, x, keys):
                    q = self.encoder(x)
                    logits = torch.einsum("nc,ck->nk", [q, self.queue.detach()])
                    self._enqueue(keys)
                    return logits
            """,
            line=16,
            message="`self.queue[...] = ...` also changes `self.queue.detach()`",
            fixed="""
            import torch
            from torch import nn

            class MoCo(nn.Module):
                def __init__(self, encoder, dim=8, k=16):
                    super().__init__()
                    self.encoder = encoder
                    self.register_buffer("queue", torch.randn(dim, k))

                @torch.no_grad()
                def _enqueue(self, keys):
                    self.queue[:, : keys.shape[0]] = keys.T

                def forward(self, x, keys):
                    q = self.encoder(x)
                    logits = torch.einsum("nc,ck->nk", [q, self.queue.detach().clone()])
                    self._enqueue(keys)
                    return logits
            """,
        ),
        # A bank saved by a matrix product, refilled before the loss is backpropagated.
        Invalid(
            """
            import torch

            def step(model, x, bank, keys, optimizer):
                q = model(x)
                logits = q @ bank.detach()
                bank[:, : keys.shape[0]] = keys.T
                loss = logits.logsumexp(-1).mean()
                loss.backward()
                optimizer.step()
            """,
            line=5,
        ),
        Invalid(
            """
            import torch.nn.functional as F

            def dqn_loss(q_net, states, actions, rewards):
                q = q_net(states)
                target = q.detach()
                target[range(len(actions)), actions] = rewards
                return F.mse_loss(q, target)
            """,
            line=6,
            column=5,
            message="`target[...] = ...` also changes `q`, whose storage `target` shares",
            fixed="""
            import torch.nn.functional as F

            def dqn_loss(q_net, states, actions, rewards):
                q = q_net(states)
                target = q.detach().clone()
                target[range(len(actions)), actions] = rewards
                return F.mse_loss(q, target)
            """,
        ),
        Invalid(
            """
            import torch

            def train_step(model, x, y, criterion, writer):
                pred = model(x)
                image = pred.detach()
                image.mul_(255)
                writer.add_image("pred", image)
                loss = criterion(pred, y)
                loss.backward()
            """,
            line=6,
            message="`image.mul_()` also changes `pred`",
        ),
        Invalid(
            """
            from torch import nn

            class LastStepHead(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.rnn = nn.GRU(8, 8, batch_first=True)

                def forward(self, x):
                    out, _ = self.rnn(x)
                    last = out[:, -1].detach()
                    last.zero_()
                    return out.sum(1) + last
            """,
            line=11,
            fixed="""
            from torch import nn

            class LastStepHead(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.rnn = nn.GRU(8, 8, batch_first=True)

                def forward(self, x):
                    out, _ = self.rnn(x)
                    last = out[:, -1].detach().clone()
                    last.zero_()
                    return out.sum(1) + last
            """,
        ),
        Invalid(
            """
            import torch

            def smooth_targets(model, x, eps=0.1):
                logits = model(x)
                soft = torch.softmax(logits, dim=-1)
                baseline = soft.detach()
                baseline += eps
                return (soft * baseline.log()).sum()
            """,
            line=7,
            message="`baseline += ...` also changes `soft`",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        """`torch.einsum(eq, [q, self.queue.detach()])`, then `self.queue` edited
        in place (here or in a method called here) before backward: the
        product saved the alias, which shares the buffer's version counter."""
        func = node.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "detach" and not node.args):
            return
        path = storage_path(func.value, self.facts.index)
        if path is None:
            return
        saved = self.facts.shared("saved_tensors", SavedTensors)
        operation = saved.saving_operation(node)
        if operation is None or not saved.needed_later(operation):
            return
        edits = saved.edits_after(path, operation)
        if edits:
            clone = cst.Call(func=cst.Attribute(value=node, attr=cst.Name("clone")))
            detached = self.facts.module.code_for_node(node)
            self.report(node, fix=Replace(node, clone, unsafe=False), edit=edits[0].text, source=detached, alias=path)

    def visit_Assign(self, node: cst.Assign) -> None:
        facts = self.facts
        aliases = facts.shared("aliases", StorageAliases)
        found = aliases.detached_alias(node)
        if found is None or found.through != "detach" or found.alias == found.source.value:
            return  # `.data` aliases are DL101's: no version check there
        holds = facts.values.holds(found.source)
        if holds & _NOT_ACTIVATION:
            return
        if not holds & _IN_GRAPH and not facts.values.backpropagated_after(found.source, node):
            return  # not known to be in a graph, by origin or by use
        source = found.source.value
        source_binding = aliases.binding(source, node)
        scope = facts.index.scope_of(node)
        for edit in facts.shared("inplace", InplaceEdits).edits_of(found.alias, scope):
            if not facts.index.before(node, edit.node) or aliases.binding(found.alias, edit.node) is not node:
                continue
            if aliases.value_reads_after(source, source_binding, self._statement(edit.node)):
                clone = cst.Call(func=cst.Attribute(value=found.detach, attr=cst.Name("clone")))
                fix = Replace(found.detach, clone, unsafe=False)
                self.report(edit.node, fix=fix, edit=edit.text, source=source, alias=found.alias)
                return

    def _statement(self, node: cst.CSTNode) -> cst.CSTNode:
        if isinstance(node, cst.BaseSmallStatement):
            return self.facts.index.parent(node) or node
        return self.facts.index.enclosing(node, cst.SimpleStatementLine) or node
