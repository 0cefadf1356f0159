from __future__ import annotations

from typing import Optional

import libcst as cst

from detachlint.analysis import Holds
from detachlint.analysis.loops import Accumulation, LoopFacts
from detachlint.rule import Invalid, Replace, Rule

_ATOMIC = (cst.Name, cst.Attribute, cst.Subscript, cst.Call)
_SUMMARY_LIMIT = 30


class LossAccumulationKeepsGraph(Rule):
    """A loss or activation summed or collected across loop iterations with its graph.

    ## What it does
    Flags `running_loss += loss`, `total = total + loss`,
    `losses.append(loss)` and `history[k].append(out)` in a loop when the
    added value still requires grad (a loss, a model output) and the
    accumulator is never backpropagated: it is kept for reporting, not for
    a gradient.

    ## Why is this bad?
    A tensor that requires grad holds on to its whole autograd graph, with
    every activation saved for backward. Adding it to a running total (or
    keeping it in a list) links each iteration's graph to the accumulator,
    so none of them is freed: memory grows with every batch until the epoch
    ends or the process runs out of it, and the arithmetic on the total
    is recorded too.

    ## Example
    ```python
    from torch import nn

    def train_epoch(model, loader, optimizer):
        criterion = nn.CrossEntropyLoss()
        running_loss = 0.0
        for images, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
            running_loss += loss
        return running_loss / len(loader)
    ```

    Use instead:
    ```python
    from torch import nn

    def train_epoch(model, loader, optimizer):
        criterion = nn.CrossEntropyLoss()
        running_loss = 0.0
        for images, labels in loader:
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
        return running_loss / len(loader)
    ```

    ## Not flagged
    - Values turned into numbers or cut from the graph first: `loss.item()`,
      `float(loss)`, `loss.detach()`.
    - A value detached in place after it was collected, in the same
      iteration (`history.append(loss)` then `loss.detach_()`).
    - Gradient accumulation: the accumulator, or a value computed from it,
      is backpropagated after the loop or every few iterations in it
      (`total.backward()`, `(total / k).backward()`, `accelerator.backward(total)`).
    - Loss terms or features accumulated over heads, scales, layers or
      stacks within one step, in a loop that neither iterates over data nor
      trains: that graph is the one the step's backward needs.
    - The other values a loss function returns beside the loss
      (`loss, sample_size, logs = criterion(model, batch)`).
    - An accumulator bound afresh earlier in the same iteration
      (`loss = ce(out, y)` then `loss += aux`): nothing outlives the iteration.
    - Accumulation under `torch.no_grad()` or `torch.inference_mode()`.
    - Counts and other values without a graph: `correct += pred.eq(y).sum()`,
      `(out.argmax(1) == y).sum()`.
    - Test code.

    ## Fix safety
    `running_loss += loss` and `total = total + loss` become
    `running_loss += loss.item()`: the total becomes a Python number with
    the same value. The fix is safe unless later code calls tensor methods on
    the total (`running_loss.item()`) or hands it on (returns it, stores it),
    then it is marked unsafe. `losses.append(loss)` becomes
    `losses.append(loss.detach())`: the list keeps tensors with the same
    values and devices, without their graphs; unsafe when the list is
    handed on. Only losses get `.item()` (they are scalars); other tensors
    added with `+=` get no fix.

    ## Verification
    The probe runs three iterations of the loop and counts the autograd
    nodes reachable from the accumulator's `grad_fn`; confirmed when the
    count grows with every iteration.

    ## References
    - PyTorch FAQ, "My model reports cuda runtime error(2): out of memory":
      "Don't accumulate history across your training loop".
    """

    code = "DL401"
    name = "loss-accumulation-keeps-graph"
    fix_title = "Accumulate the value without its graph (`.item()`, `.detach()`)"
    message = "`{accumulation}` keeps every iteration's autograd graph alive: memory grows with each iteration until the loop ends or the process runs out"
    severity = "error"
    default_enabled = True

    valid = [
        # Detached in place after it was kept.
        """
        import torch

        def train(model, chunks, criterion, optimizer, history):
            for tokens, targets in chunks:
                loss = criterion(model(tokens), targets)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                history.append(loss)
                loss.detach_()
        """,
        # .item(), float() and .detach() drop the graph.
        """
        import torch.nn.functional as F

        def train(model, loader, optimizer):
            total, losses, history = 0.0, [], []
            for x, y in loader:
                loss = F.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item()
                losses.append(float(loss))
                history.append(loss.detach())
        """,
        # Gradient accumulation, backpropagated after the loop.
        """
        import torch.nn.functional as F

        def accumulate(model, micro_batches, optimizer):
            optimizer.zero_grad()
            total = 0
            for x, y in micro_batches:
                total = total + F.mse_loss(model(x), y)
            (total / len(micro_batches)).backward()
            optimizer.step()
        """,
        # Loss terms over heads, returned to a caller that backpropagates them.
        """
        from torch import nn

        class MultiHeadLoss(nn.Module):
            def __init__(self):
                super().__init__()
                self.criterion = nn.CrossEntropyLoss()

            def forward(self, outputs, target):
                loss = 0
                for out in outputs:
                    loss += self.criterion(out, target)
                return loss / len(outputs)
        """,
        # Bound afresh every iteration: nothing is kept across iterations.
        """
        import torch.nn.functional as F

        def train(model, loader, optimizer, aux_weight=0.4):
            for x, y in loader:
                out, aux = model(x)
                loss = F.cross_entropy(out, y)
                loss += aux_weight * F.cross_entropy(aux, y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
        # Under no_grad.
        """
        import torch
        from torch import nn

        @torch.no_grad()
        def evaluate(model, loader):
            criterion = nn.CrossEntropyLoss()
            total = 0.0
            for x, y in loader:
                total += criterion(model(x), y)
            return total / len(loader)
        """,
        # Counts: comparisons and argmax carry no graph.
        """
        def train(model, loader, optimizer, criterion):
            correct = 0
            hits = []
            for x, y in loader:
                out = model(x)
                loss = criterion(out, y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                pred = out.argmax(dim=1)
                correct += pred.eq(y).sum()
                hits.append((out.argmax(1) == y).float().mean())
        """,
        # A pytest test.
        """
        import torch
        from torch import nn

        def test_losses_are_finite():
            model = nn.Linear(4, 2)
            criterion = nn.MSELoss()
            losses = []
            for _ in range(3):
                losses.append(criterion(model(torch.randn(8, 4)), torch.randn(8, 2)))
            assert all(torch.isfinite(l) for l in losses)
        """,
        # Features collected in forward and returned.
        """
        from torch import nn

        class Backbone(nn.Module):
            def __init__(self):
                super().__init__()
                self.stages = nn.ModuleList([nn.Conv2d(3, 3, 3, padding=1) for _ in range(4)])

            def forward(self, x):
                features = []
                for stage in self.stages:
                    x = stage(x)
                    features.append(x)
                return features
        """,
        # Outputs of a stack of layers collected within one forward pass.
        """
        from torch import nn

        class GraphUNet(nn.Module):
            def __init__(self, depth=3):
                super().__init__()
                self.pools = nn.ModuleList([nn.Linear(8, 8) for _ in range(depth)])
                self.ups = nn.ModuleList([nn.Linear(8, 8) for _ in range(depth)])

            def forward(self, x):
                skips = []
                for pool in self.pools:
                    x = pool(x).relu()
                    skips += [x]
                for up, skip in zip(self.ups, reversed(skips)):
                    x = up(x) + skip
                return x
        """,
        # Sample counts and logs returned beside the loss are not the loss.
        """
        def train_step(model, criterion, optimizer, samples):
            agg_loss, agg_sample_size, agg_logs = 0.0, 0, {}
            for sample in samples:
                loss, sample_size, logging_output = criterion(model, sample)
                optimizer.backward(loss)
                agg_loss += loss.item()
                agg_sample_size += sample_size
                for k in logging_output:
                    agg_logs[k] = agg_logs.get(k, 0) + logging_output[k]
            return agg_loss, agg_sample_size, agg_logs
        """,
        # Gradient accumulation through accelerate, every few steps.
        """
        import torch.nn.functional as F

        def train(model, loader, optimizer, accelerator, accum=4):
            total = 0.0
            for step, (x, y) in enumerate(loader):
                total += F.cross_entropy(model(x), y) / accum
                if (step + 1) % accum == 0:
                    accelerator.backward(total)
                    optimizer.step()
                    optimizer.zero_grad()
                    total = 0.0
        """,
    ]

    invalid = [
        Invalid(
            """
            from torch import nn

            def train_epoch(model, loader, optimizer):
                criterion = nn.CrossEntropyLoss()
                running_loss = 0.0
                for images, labels in loader:
                    optimizer.zero_grad()
                    loss = criterion(model(images), labels)
                    loss.backward()
                    optimizer.step()
                    running_loss += loss
                print(f"loss {running_loss / len(loader):.3f}")
            """,
            line=11,
            column=9,
            message="`running_loss += loss` keeps every iteration's autograd graph alive",
            fixed="""
            from torch import nn

            def train_epoch(model, loader, optimizer):
                criterion = nn.CrossEntropyLoss()
                running_loss = 0.0
                for images, labels in loader:
                    optimizer.zero_grad()
                    loss = criterion(model(images), labels)
                    loss.backward()
                    optimizer.step()
                    running_loss += loss.item()
                print(f"loss {running_loss / len(loader):.3f}")
            """,
        ),
        Invalid(
            """
            import torch.nn.functional as F

            class Trainer:
                def fit(self, model, train_loader, optimizer):
                    losses = []
                    for x, y in train_loader:
                        loss = F.nll_loss(model(x), y)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                        losses.append(loss)
                    print(sum(losses) / len(losses))
            """,
            line=11,
            message="`losses.append(loss)`",
            fixed="""
            import torch.nn.functional as F

            class Trainer:
                def fit(self, model, train_loader, optimizer):
                    losses = []
                    for x, y in train_loader:
                        loss = F.nll_loss(model(x), y)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                        losses.append(loss.detach())
                    print(sum(losses) / len(losses))
            """,
        ),
        Invalid(
            """
            import torch
            from torch import nn

            model = nn.Linear(10, 1)
            criterion = nn.MSELoss()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            total = 0
            for step in range(1000):
                x, y = torch.randn(32, 10), torch.randn(32, 1)
                loss = criterion(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total = total + loss * x.size(0)
            print(total)
            """,
            line=14,
            message="`total = total + loss * x.size(0)`",
            fixed="""
            import torch
            from torch import nn

            model = nn.Linear(10, 1)
            criterion = nn.MSELoss()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            total = 0
            for step in range(1000):
                x, y = torch.randn(32, 10), torch.randn(32, 1)
                loss = criterion(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total = total + loss.item() * x.size(0)
            print(total)
            """,
        ),
        Invalid(
            """
            from collections import defaultdict

            import torch

            def validate(model, val_loader, criterion):
                model.eval()
                history = defaultdict(list)
                for batch in val_loader:
                    out = model(batch["input"])
                    history["loss"].append(criterion(out, batch["target"]))
                    history["logits"].append(out)
                return history
            """,
            line=10,
            message="`history[\"loss\"].append(",
        ),
    ]

    @property
    def _loops(self) -> LoopFacts:
        return self.facts.shared("loops", LoopFacts)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._check(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        self._check(node)

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "append":
            self._check(node)

    def _check(self, node: cst.CSTNode) -> None:
        loops = self._loops
        accumulation = loops.accumulation(node)
        if accumulation is None or not loops.carries_graph(accumulation.value):
            return
        facts = self.facts
        if facts.grad_mode.is_disabled(node) or facts.intent.is_test_code(node):
            return
        scope = facts.index.scope_of(node)
        if loops.is_backpropagated(accumulation.key, scope) or self._detached_in_place_after(accumulation):
            return
        # Only a loop over batches or training steps outlives its graphs: a
        # loop over heads, layers or stacks inside one step builds the graph
        # that step's backward needs anyway.
        if not any(loops.trains(loop) or loops.iterates_data(loop) for loop in accumulation.loops):
            return
        self.report(node, fix=self._fix(accumulation, scope), accumulation=self._describe(accumulation))

    def _detached_in_place_after(self, accumulation: Accumulation) -> bool:
        """`history.append(loss)` then `loss.detach_()` in the same iteration:
        the kept tensor itself leaves the graph."""
        value, index = accumulation.value, self.facts.index
        if accumulation.kind != "append" or not isinstance(value, cst.Name):
            return False
        body = accumulation.loops[0].body
        return any(
            isinstance(call.func, cst.Attribute)
            and call.func.attr.value == "detach_"
            and isinstance(call.func.value, cst.Name)
            and call.func.value.value == value.value
            and index.before(accumulation.node, call)
            for call in index.descendants(body, cst.Call)
        )

    def _describe(self, accumulation: Accumulation) -> str:
        value = self.facts.module.code_for_node(accumulation.value)
        if len(value) > _SUMMARY_LIMIT or "\n" in value:
            value = "..."
        target = accumulation.target
        if accumulation.kind == "append":
            return f"{target}.append({value})"
        if accumulation.kind == "rebind":
            return f"{target} = {target} + {value}"
        return f"{target} += {value}"

    def _fix(self, accumulation: Accumulation, scope: cst.CSTNode) -> Optional[Replace]:
        loops = self._loops
        handed_on = loops.escapes(accumulation.key, scope)
        if accumulation.kind == "append":
            value = accumulation.value
            if not isinstance(value, _ATOMIC) and not value.lpar:
                value = value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            new = cst.Call(cst.Attribute(value, cst.Name("detach")))
            return Replace(accumulation.value, new, unsafe=handed_on)
        operand = self._graph_operand(accumulation.value)
        # `.item()` needs a one-element tensor: trust it for losses only.
        if operand is None or not self.facts.values.holds(operand) & Holds.LOSS:
            return None
        new = cst.Call(cst.Attribute(operand, cst.Name("item")))
        unsafe = handed_on or loops.used_as_tensor(accumulation.key, scope)
        return Replace(operand, new, unsafe=unsafe)

    def _graph_operand(self, value: cst.BaseExpression) -> Optional[cst.BaseExpression]:
        """The one operand of `loss * n` (or `value` itself) that carries the graph."""
        if isinstance(value, _ATOMIC):
            return value
        if not isinstance(value, cst.BinaryOperation) or value.lpar:
            return None
        carriers = [side for side in (value.left, value.right) if self._loops.carries_graph(side)]
        if len(carriers) != 1:
            return None
        return self._graph_operand(carriers[0])
