from __future__ import annotations

from typing import Optional

import libcst as cst

from detachlint.analysis import Holds
from detachlint.analysis.loops import Accumulation, LoopFacts
from detachlint.rule import Invalid, Replace, Rule

_ATOMIC = (cst.Name, cst.Attribute, cst.Subscript, cst.Call)
_SUMMARY_LIMIT = 30


UNTIL_THE_END = "until the total is freed"


class LossAccumulationKeepsGraph(Rule):
    """A loss or activation summed or collected across loop iterations with its graph.

    ## What it does
    Flags `running_loss += loss`, `total = total + loss`,
    `losses.append(loss)` and `history[k].append(out)` in a loop when the
    added value still requires grad (a loss, a model output) and the
    accumulator is never backpropagated: it is kept for reporting, not for
    a gradient. The same across calls of a method: `self.cost_his.append(loss)`
    or `self.total += loss` in a method that trains, where the object keeps
    what every call added; and `meter.update(loss)` in a training loop or
    step, where `update` is a method of the file that adds its argument to
    the object's state (`self.sum += val`, `self.sums[k] += v` for `v` in
    its argument). The added value may come through the file's own code: a
    loss term returned by a method beside the loss, a dict of loss terms a
    criterion class returns, what a helper returns from a model's output;
    or from another file of the run (`total += train_step(model, batch)`
    with `train_step` in `engine.py` returning its loss). Appending the flagged total itself
    (`epoch_losses.append(loss_sum)` after `loss_sum += loss`) is the same
    graph, reported once, at the total.

    ## Why is this bad?
    A tensor that requires grad holds on to its autograd graph. Adding it to
    a running total (or keeping it in a list) links each iteration's graph
    to the accumulator, so none of them is freed until the total is: the
    graph's nodes pile up step after step, the arithmetic on the total is
    recorded too, and the activations the nodes saved stay with them
    wherever no `backward()` has freed them (the total built before the
    backward, or `retain_graph=True`). Measured on a small CNN
    (`bench/dl401_growth.py`, batch of 8 at 32x32): added after `backward()`,
    11 nodes and about 14 KiB a step more than `.item()`; with
    `retain_graph=True`, about 1.2 MiB a step.

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
    - A collection bound afresh for each optimizer step and filled by a loop
      over that step's micro-batches: it lives for one step.
    - Object state bound afresh in the same method, or backpropagated by one
      of the class's methods (a policy's `self.saved_log_probs`, summed into
      the episode's loss), or filled by a method that does not train.
    - A meter that converts what it is given before adding it
      (`self.total += val.item()`).
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
    nodes reachable from the accumulator (for `tracker.update(loss)`, the
    tracker's attribute the method adds to; for `totals[key] += loss`, one
    entry across iterations) after each; confirmed when the
    count grows with every iteration, refuted when it does not. A loop that
    cannot run is inconclusive, with the reason.

    ## References
    - PyTorch FAQ, "My model reports cuda runtime error(2): out of memory":
      "Don't accumulate history across your training loop".
    """

    code = "DL401"
    name = "loss-accumulation-keeps-graph"
    fix_title = "Accumulate the value without its graph (`.item()`, `.detach()`)"
    message = (
        "`{accumulation}`{via} keeps every iteration's autograd graph alive: its nodes pile up {until}, and with them "
        "the activations they saved wherever no `backward()` has freed them (before it runs, or with `retain_graph=True`)"
    )
    harm = "waste"
    default_enabled = True

    valid = [
        # A template method whose every override returns a number.
        """
        import torch.nn.functional as F

        class BaseTrainer:
            def train_epoch(self, loader):
                total = 0.0
                for x, y in loader:
                    total += self.step(x, y)
                return total

            def step(self, x, y):
                \"\"\"One optimisation step; returns the loss as a float.\"\"\"
                raise NotImplementedError()

        class RegressionTrainer(BaseTrainer):
            def step(self, x, y):
                loss = F.mse_loss(self.model(x), y)
                loss.backward()
                return loss.item()

        class ClassificationTrainer(BaseTrainer):
            def step(self, x, y):
                loss = F.cross_entropy(self.model(x), y)
                loss.backward()
                return loss.detach()
        """,
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
        # The outputs of one optimizer step's micro-batches, dropped at the step.
        """
        import torch

        def train_epoch(model, batch_groups, optimizer):
            for batch_group in batch_groups:
                optimizer.zero_grad()
                group_outputs = []
                for batch in batch_group:
                    outputs = model(**batch)
                    group_outputs.append(outputs)
                    (outputs["loss"] / len(batch_group)).backward()
                optimizer.step()
        """,
        # State filled by a method that does not train, backpropagated by another.
        """
        import torch

        class Policy(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.affine = torch.nn.Linear(4, 2)
                self.saved_log_probs = []

            def select_action(self, state):
                probs = torch.softmax(self.affine(state), dim=-1)
                dist = torch.distributions.Categorical(probs)
                action = dist.sample()
                self.saved_log_probs.append(dist.log_prob(action))
                return action.item()

            def finish_episode(self, returns, optimizer):
                loss = -(torch.stack(self.saved_log_probs) * returns).sum()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                self.saved_log_probs = []
        """,
        # A meter that converts what it is given.
        """
        import torch.nn.functional as F

        class AverageMeter:
            def __init__(self):
                self.sum, self.count = 0.0, 0

            def update(self, val, n=1):
                self.sum += val.item() * n
                self.count += n

        def train(model, loader, optimizer):
            meter = AverageMeter()
            for x, y in loader:
                loss = F.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                meter.update(loss, x.size(0))
            return meter.sum / meter.count
        """,
        # The detached loss added in place each step; the meter keeps no graph.
        """
        import torch
        from torch import nn

        class Meter:
            def __init__(self):
                self.total = torch.zeros(())

        def fit(net, batches, opt, meter):
            for x, y in batches:
                err = nn.functional.mse_loss(net(x), y)
                meter.total.add_(err.detach())
                opt.zero_grad()
                err.backward()
                opt.step()

        net = nn.Linear(3, 1)
        fit(net, [(torch.randn(4, 3), torch.randn(4, 1))], torch.optim.SGD(net.parameters(), lr=0.1), Meter())
        """,
        # A loss summed in place over micro-batches, backpropagated once after them.
        """
        import torch
        import torch.nn.functional as F

        def accumulate(model, chunks, optimizer):
            total = torch.zeros(())
            for x, y in chunks:
                total.add_(F.mse_loss(model(x), y))
            optimizer.zero_grad()
            total.backward()
            optimizer.step()
        """,
    ]

    invalid = [
        # A tensor a stats object made, reached through a getter, updated in place each step.
        Invalid(
            """
            import torch
            from torch import nn

            class Meter:
                def __init__(self):
                    self.totals = {"loss": torch.zeros(())}

                def slot(self, key):
                    return self.totals[key]

            def fit(net, batches, opt, meter):
                for x, y in batches:
                    err = nn.functional.mse_loss(net(x), y)
                    meter.slot("loss").add_(err)
                    opt.zero_grad()
                    err.backward()
                    opt.step()

            net = nn.Linear(3, 1)
            fit(net, [(torch.randn(4, 3), torch.randn(4, 1))], torch.optim.SGD(net.parameters(), lr=0.1), Meter())
            """,
            line=14,
            message="adds to a tensor or container made before the loop",
        ),
        # Each step's loss kept in a new slot of a dict made once per epoch.
        Invalid(
            """
            import torch
            import torch.nn.functional as F

            def run(model, loader, optimizer, epochs):
                step = 0
                for epoch in range(epochs):
                    log = {}
                    for x, y in loader:
                        loss = F.cross_entropy(model(x), y)
                        optimizer.zero_grad()
                        loss.backward()
                        optimizer.step()
                        log[step] = loss
                        step += 1
            """,
            line=13,
        ),
        Invalid(
            # Reset every 100 steps: the graphs live until the reset, not forever.
            """
            import torch.nn.functional as F

            def train(model, loader, optimizer):
                running_loss = 0.0
                for step, (x, y) in enumerate(loader):
                    loss = F.cross_entropy(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    running_loss += loss
                    if step % 100 == 99:
                        print(f"loss {running_loss / 100:.3f}")
                        running_loss = 0.0
            """,
            line=10,
            message="its nodes pile up until `running_loss` is emptied on line 13",
        ),
        # Loss terms a criterion class of the file returns beside the loss.
        Invalid(
            """
            from collections import defaultdict

            import torch
            import torch.nn.functional as F

            class DetectionLoss:
                def __call__(self, box_pred, cls_pred, targets):
                    box_loss = F.smooth_l1_loss(box_pred, targets["boxes"])
                    cls_loss = F.binary_cross_entropy_with_logits(cls_pred, targets["cls"])
                    return 7.5 * box_loss + 0.5 * cls_loss, {"box": box_loss, "cls": cls_loss}

            class Trainer:
                def __init__(self, model, optimizer):
                    self.model, self.optimizer = model, optimizer
                    self.loss_fn = DetectionLoss()

                def train_one_batch(self, images, targets):
                    box_pred, cls_pred = self.model(images)
                    loss, loss_items = self.loss_fn(box_pred, cls_pred, targets)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
                    return loss_items

                def train_one_epoch(self, dataloader):
                    totals = defaultdict(float)
                    for images, targets in dataloader:
                        for name, value in self.train_one_batch(images, targets).items():
                            totals[name] += value
                    return totals
            """,
            line=29,
            message="`totals[name] += value` keeps every iteration's autograd graph alive",
        ),
        # A template method: the base's `step` only raises, so what runs is
        # the subclass's override, which returns its loss with the graph.
        Invalid(
            """
            import torch.nn.functional as F

            class BaseTrainer:
                def __init__(self, model, optimizer):
                    self.model, self.optimizer = model, optimizer

                def train_epoch(self, loader):
                    total = 0.0
                    for x, y in loader:
                        total += self.step(x, y)
                    return total / len(loader)

                def step(self, x, y):
                    raise NotImplementedError

            class RegressionTrainer(BaseTrainer):
                def step(self, x, y):
                    loss = F.mse_loss(self.model(x), y)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
                    return loss
            """,
            line=10,
            message="`total += self.step(x, y)` keeps every iteration's autograd graph alive",
        ),
        # Kept on the agent across calls of its learning method.
        Invalid(
            """
            import torch
            from torch import nn

            class DeepQNetwork:
                def __init__(self, q_eval: nn.Module, lr=0.01):
                    self.q_eval = q_eval
                    self.loss_func = nn.MSELoss()
                    self.optimizer = torch.optim.RMSprop(self.q_eval.parameters(), lr=lr)
                    self.cost_his = []

                def learn(self, states, q_target):
                    loss = self.loss_func(self.q_eval(states), q_target)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
                    self.cost_his.append(loss)
            """,
            line=16,
            message="`self.cost_his.append(loss)` keeps every iteration's autograd graph alive",
        ),
        # Handed to a meter of the file that adds it to its state.
        Invalid(
            """
            import torch.nn.functional as F

            class LossTracker:
                def __init__(self, keys):
                    self.train_losses = {key: 0 for key in keys}

                def update_train_losses(self, loss):
                    for key in loss:
                        self.train_losses[key] += loss[key]

            def train(model, loader, optimizer, tracker):
                for x, y in loader:
                    out = model(x)
                    loss = {"total": F.cross_entropy(out, y)}
                    optimizer.zero_grad()
                    loss["total"].backward()
                    optimizer.step()
                    tracker.update_train_losses(loss)
            """,
            line=18,
            message="which adds it to `self.train_losses[key]` (line 9)",
        ),
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
        self._check_handed_to_state(node)

    def finish(self) -> None:
        """In-place accumulations the interpreter saw chain a graph onto a
        tensor that outlives the loop (`stats["loss"].add_(loss)` through a
        getter, a field made in `__init__`), wherever they are written."""
        facts = self.facts
        reported = {facts.line_of(r.node) for r in self.reports}
        for node, calls in facts.interpreter.graphs_kept_across_passes():
            # Reported already here, or where the loop hands the value on (`meter.update(loss)`).
            if {facts.line_of(n) for n in (node, *calls)} & reported or facts.grad_mode.is_disabled(node):
                continue
            reported.add(facts.line_of(node))
            shown = node
            if not isinstance(node, (cst.Call, cst.AugAssign, cst.Assign)):  # `log[step] = loss`: its target
                line = facts.index.enclosing(node, cst.SimpleStatementLine)
                shown = line.body[0] if line is not None else node
            written = facts.module.code_for_node(shown).strip()
            if "\n" in written or len(written) > 2 * _SUMMARY_LIMIT:
                written = "..."
            via = ", which adds to a tensor or container made before the loop,"
            self.report(node, accumulation=written, via=via, until=UNTIL_THE_END)

    def _check(self, node: cst.CSTNode) -> None:
        accumulation = self._hazard(node)
        if accumulation is None:
            accumulation = self._state_hazard(node)
            if accumulation is not None:
                self.report(node, fix=self._fix(accumulation, self.facts.index.scope_of(node)), accumulation=self._describe(accumulation), via="", until=UNTIL_THE_END)
            return
        if self._accumulates_accumulator(accumulation):
            return
        scope = self.facts.index.scope_of(node)
        self.report(node, fix=self._fix(accumulation, scope), accumulation=self._describe(accumulation), via="", until=self._until(accumulation))

    def _until(self, accumulation: Accumulation) -> str:
        """How long the graphs live: to the end, or to a reset in the loop."""
        reset = self._loops.reset_later(accumulation)
        if reset is None:
            return UNTIL_THE_END
        return f"until `{accumulation.target}` is emptied on line {self.facts.line_of(reset)}"

    def _state_hazard(self, node: cst.CSTNode) -> Optional[Accumulation]:
        """`self.cost_his.append(loss)` in a training method: each call of the
        method adds one more graph to what the object keeps."""
        loops, facts = self._loops, self.facts
        accumulation = loops.state_accumulation(node)
        if accumulation is None or not loops.carries_graph(accumulation.value):
            return None
        method = facts.index.scope_of(node)
        if not loops.trains(method) or not self._kept_without_backward(accumulation, node):
            return None
        if facts.grad_mode.is_disabled(node) or facts.intent.is_test_code(node):
            return None
        return accumulation

    def _kept_without_backward(self, accumulation: Accumulation, node: cst.CSTNode) -> bool:
        """The object's state is never backpropagated by any of its methods."""
        klass = self.facts.index.enclosing(node, cst.ClassDef)
        return klass is not None and not self._loops.is_backpropagated(accumulation.key, klass)

    def _check_handed_to_state(self, call: cst.Call) -> None:
        """`meter.update(loss)` in a training step, where `update` (a method
        of the file) adds its argument to the object's state
        (`self.sum += val`): the meter keeps every step's graph."""
        loops, facts = self._loops, self.facts
        method = loops.method_called(call)
        if method is None:
            return
        accumulated = loops.accumulated_parameters(method)
        if not accumulated:
            return
        scope = facts.index.scope_of(call)
        trains = loops.trains(scope) or any(loops.trains(l) or loops.iterates_data(l) for l in loops.enclosing_loops(call))
        if not trains or facts.grad_mode.is_disabled(call) or facts.intent.is_test_code(call):
            return
        for arg, param in self._bound_parameters(call, method, self.facts.index):
            accumulation = accumulated.get(param)
            if accumulation is None or not self._carries_graph(arg):
                continue
            if not self._kept_without_backward(accumulation, accumulation.node):
                continue
            via = f", which adds it to `{accumulation.target}` (line {facts.line_of(accumulation.node)}),"
            self.report(call, accumulation=facts.module.code_for_node(call), via=via, until=UNTIL_THE_END)
            return

    def _carries_graph(self, arg: cst.BaseExpression) -> bool:
        """`loss`, or a list or tuple of values one of which carries a graph."""
        if isinstance(arg, (cst.List, cst.Tuple)):
            return any(self._carries_graph(element.value) for element in arg.elements)
        return self._loops.carries_graph(arg) or self._loops.carries_graph_from_callers(arg)

    @staticmethod
    def _bound_parameters(call: cst.Call, method: cst.FunctionDef, index):
        """(argument, parameter name) pairs of `obj.method(...)`."""
        params = [p.name.value for p in method.params.params]
        if params and params[0] == index.instance_param(method):
            params = params[1:]
        position = 0
        for arg in call.args:
            if arg.star:
                return
            if arg.keyword is not None:
                yield arg.value, arg.keyword.value
            elif position < len(params):
                yield arg.value, params[position]
                position += 1

    def _hazard(self, node: cst.CSTNode) -> Optional[Accumulation]:
        """The accumulation `node` performs, when it keeps graphs across iterations."""
        loops = self._loops
        accumulation = loops.accumulation(node)
        if accumulation is None:
            return None
        facts = self.facts
        if facts.grad_mode.is_disabled(node) or facts.intent.is_test_code(node):
            return None
        # Only a loop over batches or training steps outlives its graphs: a
        # loop over heads, layers or stacks inside one step builds the graph
        # that step's backward needs anyway.
        if not any(loops.trains(loop) or loops.iterates_data(loop) for loop in accumulation.loops):
            return None
        if facts.interpreter.holds_no_graph(accumulation.value):
            return None  # seen to hold data in every context it ran in (`n += t.item()`)
        # Asked last: it may follow the value through the file's callers.
        if not self._carries_graph(accumulation.value):
            return None
        scope = facts.index.scope_of(node)
        if loops.is_backpropagated(accumulation.key, scope) or self._detached_in_place_after(accumulation):
            return None
        if self._one_step_of_micro_batches(accumulation):
            return None
        return accumulation

    def _one_step_of_micro_batches(self, accumulation: Accumulation) -> bool:
        """Bound afresh by the enclosing loop, which steps the optimizer once
        per iteration after the accumulating loop: the collection holds the
        micro-batches of one optimizer step, then goes (gradient accumulation
        in a trainer that keeps each micro-batch's outputs)."""
        loops, index = self._loops, self.facts.index
        enclosing = loops.enclosing_loops(accumulation.node)
        outer = enclosing[len(accumulation.loops)] if len(enclosing) > len(accumulation.loops) else None
        if outer is None:
            return False
        inner = accumulation.loops[-1]
        return any(not index.is_inside(step, inner) for step in loops.optimizer_steps(outer.body))

    def _accumulates_accumulator(self, accumulation: Accumulation) -> bool:
        """`epoch_losses.append(loss_sum)` where `loss_sum += loss` is itself
        flagged: the graph it keeps is the one that accumulation collects, and
        fixing that one fixes both; one finding, at the root."""
        value = accumulation.value
        if not isinstance(value, cst.Name):
            return False
        scope = self.facts.values.scope(value)
        return any(
            binding is not accumulation.node and self._hazard(binding) is not None
            for binding, _ in scope.reaching(value)
            if isinstance(binding, (cst.AugAssign, cst.Assign))
        )

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
            described = f"{target}.append({value})"
        elif accumulation.kind == "rebind":
            described = f"{target} = {target} + {value}"
        else:
            described = f"{target} += {value}"
        # Other spellings (`d["k"] = d.get("k", 0) + loss`, `d.setdefault("k", []).append(loss)`) as written.
        written = self.facts.module.code_for_node(accumulation.node).strip()
        if described not in written and "\n" not in written and len(written) <= 2 * _SUMMARY_LIMIT:
            return written
        return described

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
