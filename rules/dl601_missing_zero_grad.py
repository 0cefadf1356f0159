from __future__ import annotations

from typing import Union

import libcst as cst

from detachlint.analysis.loops import LoopFacts
from detachlint.analysis.names import dotted
from detachlint.rule import Invalid, Rule

Loop = Union[cst.For, cst.While]


class MissingZeroGrad(Rule):
    """Training loop that never zeroes gradients.

    ## What it does
    Flags the optimizer step of a loop that calls `backward()` and
    `optimizer.step()` but clears gradients nowhere inside the loop: no
    `optimizer.zero_grad()`, `model.zero_grad()`, `p.grad = None`,
    `p.grad.zero_()`, or call of a function of the same file that does one
    of these. Also flagged: a training-step function of its own (backward
    and step) called in a loop of the same file, when neither it nor the
    calling loop zeroes; and a step on a path that skips the zeroing, when
    the only zeroing sits in the other arm of an `if`
    (`if bf16: ...; opt.step()` / `else: opt.zero_grad(); ...`). The
    optimizer is known by what it holds, also when a function of the file
    builds it (`model, opt = build_model()`) or every caller passes one.

    ## Why is this bad?
    `backward()` adds into `.grad`; it never overwrites it. Without zeroing,
    the gradient used by step *n* is the sum of the gradients of all *n*
    batches so far: updates grow with every step, the effective learning
    rate explodes, and training diverges or stalls while the loss curve
    gives no hint why.

    ## Example
    ```python
    import torch.nn.functional as F

    def train(model, loader, optimizer):
        model.train()
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
    ```

    Use instead:
    ```python
    import torch.nn.functional as F

    def train(model, loader, optimizer):
        model.train()
        for x, y in loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
    ```

    ## Not flagged
    - Deliberate gradient accumulation: zeroing every k steps, under a
      condition, or after the step.
    - Zeroing by hand: `p.grad = None`, `p.grad.zero_()`,
      `p.grad.data.zero_()`, `model.zero_grad(set_to_none=True)`.
    - Zeroing in a helper or method of the same file called from the loop,
      or in an LBFGS-style closure passed to `step`.
    - A training-step function whose calling loop zeroes around the call.
    - Loops whose gradients come from `torch.autograd.grad` (which does not
      touch `.grad`) and are assigned to `p.grad`.
    - An optimizer built inside the loop, typically over fresh tensors.
    - Test code.

    ## Fix safety
    No automatic fix: where the zeroing belongs (every step, or every k
    steps for accumulation) is the author's call.

    ## Verification
    The probe runs the loop for two steps of the finding's `step()` and reads
    the `.grad` of the parameters it updates at each step and around every
    backward in between: confirmed when the gradients the first step applied
    are still there, never cleared, when the next backward adds to them (the
    second step applies the sum); refuted when they are None or zero again
    before the second step.

    ## References
    - PyTorch tutorial, "Optimizing model parameters": "Gradients by default
      add up; to prevent double-counting, we explicitly zero them at each
      iteration".
    """

    code = "DL601"
    name = "missing-zero-grad"
    message = "`{step}` applies gradients that every `backward()` {where} adds to: nothing zeroes them, so each step uses the sum over all batches so far"
    harm = "wrong-gradients"
    default_enabled = True

    valid = [
        # Zeroing every k steps, under a condition.
        """
        import torch.nn.functional as F

        def train(model, loader, optimizer, accum_steps=4):
            for i, (x, y) in enumerate(loader):
                loss = F.cross_entropy(model(x), y) / accum_steps
                loss.backward()
                if (i + 1) % accum_steps == 0:
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)
        """,
        # Zeroing by hand.
        """
        import torch

        def fit(model, batches, optimizer, criterion):
            for x, y in batches:
                for p in model.parameters():
                    p.grad = None
                criterion(model(x), y).backward()
                optimizer.step()
        """,
        # A helper of the same file zeroes.
        """
        import torch

        class Trainer:
            def reset(self):
                self.model.zero_grad()

            def run(self, loader):
                for x, y in loader:
                    self.reset()
                    self.criterion(self.model(x), y).backward()
                    self.optimizer.step()
        """,
        # LBFGS closure zeroes.
        """
        import torch

        def style_transfer(image, model, steps=300):
            optimizer = torch.optim.LBFGS([image])
            for _ in range(steps):
                def closure():
                    optimizer.zero_grad()
                    loss = model(image)
                    loss.backward()
                    return loss
                optimizer.step(closure)
        """,
        # torch.autograd.grad: gradients are assigned, not accumulated.
        """
        import torch

        def meta_step(model, tasks, optimizer):
            params = list(model.parameters())
            for x, y in tasks:
                loss = model(x, y)
                grads = torch.autograd.grad(loss, params)
                for p, g in zip(params, grads):
                    p.grad = g
                optimizer.step()
        """,
        # A fresh optimizer over fresh tensors every iteration.
        """
        import torch

        def one_step_attack(model, images, lr=0.01):
            results = []
            for image in images:
                delta = torch.zeros_like(image, requires_grad=True)
                optimizer = torch.optim.SGD([delta], lr=lr)
                model(image + delta).sum().backward()
                optimizer.step()
                results.append(delta.detach())
            return results
        """,
        # A pytest test.
        """
        import torch

        def test_step_changes_weights():
            model = torch.nn.Linear(2, 1)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for _ in range(2):
                model(torch.ones(1, 2)).sum().backward()
                optimizer.step()
        """,
        # A training-step function; the calling loop zeroes around the call.
        """
        import torch.nn.functional as F

        def train_step(model, optimizer, x, y):
            loss = F.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
            return loss.item()

        def fit(model, optimizer, loader):
            for x, y in loader:
                optimizer.zero_grad(set_to_none=True)
                train_step(model, optimizer, x, y)
        """,
    ]

    invalid = [
        # The step runs on a branch whose zeroing is in the other arm, in a
        # function called once per batch.
        Invalid(
            """
            import torch
            import torch.nn.functional as F

            def train_step(model, opt, x, y, use_amp):
                if use_amp:
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        loss = F.mse_loss(model(x), y)
                    loss.backward()
                    opt.step()
                else:
                    opt.zero_grad()
                    loss = F.mse_loss(model(x), y)
                    loss.backward()
                    opt.step()
                return loss.item()

            def main(model, loader, use_amp=True):
                opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
                for x, y in loader:
                    train_step(model, opt, x, y, use_amp)
            """,
            line=9,
            message="`opt.step()` applies gradients that every `backward()` of `train_step`, called in a loop on line 19,",
        ),
        # The optimizer comes from a builder function of the file.
        Invalid(
            """
            import torch
            from torch.nn import Linear
            from torch.nn.functional import mse_loss

            def build_model():
                model = Linear(4, 2)
                opt = torch.optim.SGD(model.parameters(), lr=0.1)
                return model, opt

            def run(x, y, epochs=100):
                model, opt = build_model()
                for epoch in range(epochs):
                    loss = mse_loss(model(x), y)
                    loss.backward()
                    opt.step()
            """,
            line=15,
        ),
        Invalid(
            """
            import torch.nn.functional as F

            def train(model, loader, optimizer):
                model.train()
                for x, y in loader:
                    loss = F.cross_entropy(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
            line=8,
            column=9,
            message="`optimizer.step()` applies gradients that every `backward()` in this loop adds to",
        ),
        Invalid(
            """
            import torch
            from torch import nn

            model = nn.Linear(10, 1)
            optimizer = torch.optim.Adam(model.parameters())
            scaler = torch.cuda.amp.GradScaler()
            optimizer.zero_grad()
            for step in range(1000):
                with torch.autocast("cuda"):
                    loss = model(torch.randn(8, 10)).pow(2).mean()
                scaler.scale(loss).backward()
                scaler.step(optimizer)
                scaler.update()
            """,
            line=12,
            message="`scaler.step(optimizer)`",
        ),
        Invalid(
            """
            from torch import nn, optim

            class Agent:
                def __init__(self, policy: nn.Module):
                    self.policy = policy
                    self.optimizer = optim.Adam(policy.parameters(), lr=3e-4)

                def update(self, rollouts, epochs=4):
                    self.optimizer.zero_grad()
                    for _ in range(epochs):
                        for batch in rollouts:
                            loss = self.policy.loss(batch)
                            loss.backward()
                            self.optimizer.step()
            """,
            line=14,
        ),
    ]

    @property
    def _loops(self) -> LoopFacts:
        return self.facts.shared("loops", LoopFacts)

    def visit_For(self, node: cst.For) -> None:
        self._check(node)

    def visit_While(self, node: cst.While) -> None:
        self._check(node)

    def _check(self, loop: Loop) -> None:
        loops = self._loops
        steps = loops.optimizer_steps(loop.body)
        if not steps or not loops.backward_calls(loop.body):
            return
        # Only the innermost loop that does both: an outer loop inherits its verdict.
        for inner in list(self.facts.index.descendants(loop.body, cst.For)) + list(
            self.facts.index.descendants(loop.body, cst.While)
        ):
            if loops.optimizer_steps(inner.body) and loops.backward_calls(inner.body):
                return
        if self.facts.intent.is_test_code(loop) or any(self._built_in(step, loop) for step in steps):
            return
        # A zeroing in the other arm of an `if` does not run with this step.
        step = next((s for s in steps if not loops.zeroes_gradients_for(s, loop.body)), None)
        if step is not None:
            self.report(step, step=self.facts.module.code_for_node(step), where="in this loop")

    def finish(self) -> None:
        """The interpreter's view, whatever the optimizers are called: a step
        that runs again with gradients a backward added since its last run and
        nothing cleared (a discriminator's step in a GAN loop, a helper's step)."""
        facts = self.facts
        reported = {facts.line_of(r.node) for r in self.reports}
        # The optimizers the rule's own findings already name: one finding per optimizer.
        named = set()
        for event in facts.interpreter.events:
            if event.kind == "step" and any(r.node is event.node or any(r.node is c for c in event.calls) for r in self.reports):
                named |= event.value.refs
        for step, optimizers in facts.interpreter.steps_on_stale_gradients():
            if not isinstance(step, cst.Call) or facts.line_of(step) in reported or optimizers & named or facts.intent.is_test_code(step):
                continue
            reported.add(facts.line_of(step))
            self.report(step, step=facts.module.code_for_node(step), where="before it")

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        """A training step in a function of its own, called once per
        iteration of a loop elsewhere in the file (`for x, y in loader:
        train_step(...)`): the loop's iterations are the function's calls."""
        loops, index = self._loops, self.facts.index
        steps = [
            s for s in loops.optimizer_steps(node.body)
            if index.scope_of(s) is node and not any(loops.backward_calls(l.body) for l in loops.enclosing_loops(s))
        ]
        if not steps or not loops.backward_calls(node.body) or self.facts.intent.is_test_code(node):
            return
        callers = loops.calls_in_loops(node)
        if not callers or any(self._built_in(s, node) for s in steps):
            return
        for step in steps:
            if loops.zeroes_gradients_for(step, node.body):
                continue
            # Zeroed by the calling loop itself, around the call.
            if any(loops.zeroes_gradients_for(call, loop.body, skip=call) for call, loop in callers):
                continue
            where = f"of `{node.name.value}`, called in a loop on line {self.facts.line_of(callers[0][1])},"
            self.report(step, step=self.facts.module.code_for_node(step), where=where)
            return

    def _built_in(self, step: cst.Call, loop: Loop) -> bool:
        """Whether the stepped optimizer is created inside the loop."""
        func = step.func
        stepped = func.value if isinstance(func, cst.Attribute) and func.attr.value == "step" and not step.args else None
        if stepped is None and step.args:
            stepped = step.args[0].value
        key = dotted(stepped) if stepped is not None else None
        return key is not None and self._loops.is_assigned_in(key, loop.body)
