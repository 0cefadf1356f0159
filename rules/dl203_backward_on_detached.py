from __future__ import annotations

import libcst as cst

from detachlint.rule import Invalid, Rule


class BackwardOnDetached(Rule):
    """`backward()` on a value computed only from detached tensors, `.data` or constants.

    ## What it does
    Flags `x.backward()` (or `torch.autograd.backward(x)`) when every input
    of `x` is known to carry no graph: `.detach()` results, `.data`,
    numbers, tensors built with `torch.tensor(...)` and other factories, and
    values computed from those only.

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
    - A name assigned more than once, or in a loop: which value reaches the
      call is not certain.
    - Values computed under `torch.no_grad()`: DL302 reports those.
    - Test code, which may check that the error is raised.

    ## Fix safety
    No fix: where the graph was lost (an `.item()`, a `.detach()`, a
    rebuilt tensor) is a decision about the training code.

    ## Verification
    The probe runs the expression on synthesized tensors and shows the
    `RuntimeError` "element 0 of tensors does not require grad".

    ## References
    - PyTorch docs, `torch.Tensor.backward` and `torch.Tensor.detach`.
    """

    code = "DL203"
    name = "backward-on-detached"
    message = "`{call}` raises \"element 0 of tensors does not require grad\": `{tensor}` is computed only from detached tensors, `.data` or constants"
    severity = "error"
    default_enabled = True

    valid = [
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
    ]

    def visit_Call(self, node: cst.Call) -> None:
        values = self.facts.values
        tensor = values.backward_target(node)
        if tensor is None or not values.computed_without_graph(tensor):
            return
        if self.facts.grad_mode.is_disabled(node) or self.facts.intent.is_test_code(node):
            return  # DL302's case, or a test of the error
        self.report(
            node,
            call=self.facts.module.code_for_node(node),
            tensor=self.facts.module.code_for_node(tensor),
        )
