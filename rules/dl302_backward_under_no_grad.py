from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from detachlint.analysis.grad_mode import Mode
from detachlint.analysis.values import branched
from detachlint.rule import Invalid, Rule, brief


class BackwardUnderNoGrad(Rule):
    """`backward()` on a loss computed with autograd off.

    ## What it does
    Flags `loss.backward()`, `torch.autograd.backward(loss)` or
    `torch.autograd.grad(loss, ...)` when `loss` was computed inside
    `torch.no_grad()`, `torch.inference_mode()`,
    `torch.set_grad_enabled(False)`, in a function decorated with them, or
    in a function or method that every caller in the file runs under them
    (`model.test_step(batch)` inside `with torch.inference_mode():`).
    Also flags a function that computes a loss and backpropagates it when
    one chain of calls in the file runs it with autograd off, even if others
    do not: a model whose `forward` fine-tunes itself, called as `model(x)`
    by an evaluation helper that `evaluate()` runs under `torch.no_grad()`
    (a `model` parameter counts as the class every call passes for it).
    The callers in the other files of the run count too: `fit(...)` in
    `engine.py`, called inside `with torch.no_grad():` in `main.py`.
    `torch.enable_grad()` inside inference mode does not turn recording
    back on: tensors made there are inference tensors. When the helper that
    computes the loss forces `requires_grad` on what it returns (the usual
    way to silence the error), the message says that the backward reaches
    no parameter instead.

    ## Why is this bad?
    Nothing computed with autograd off records a graph: the loss has no
    `grad_fn`, and `backward()` raises `RuntimeError: element 0 of tensors
    does not require grad and does not have a grad_fn`. It usually happens
    when a training step is moved into a helper that is also used for
    validation, or when a `with torch.no_grad():` block grows to cover the
    loss.

    ## Example
    ```python
    import torch

    def train_step(model, x, y, criterion, optimizer):
        with torch.no_grad():
            out = model(x)
            loss = criterion(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    Use instead:
    ```python
    import torch

    def train_step(model, x, y, criterion, optimizer):
        out = model(x)
        loss = criterion(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ```

    ## Not flagged
    - A loss computed with autograd on and backpropagated inside a no-grad
      block: backward does not depend on the grad mode.
    - Code under `torch.enable_grad()` inside a `torch.no_grad()` region
      (not inside `inference_mode()`, which `enable_grad()` does not lift).
    - `torch.set_grad_enabled(flag)` with a flag that is not a literal.
    - A function run from a no-grad caller whose backward sits under an
      `if` (`if train: loss.backward()`), or reached through an `if` of
      the call chain: the caller may skip it.
    - A callable the caller received as an argument (`closure()` in an
      optimizer's `step`), which is not the function of that name.
    - Tensors only read under no-grad, not computed there: gradients taken
      with `create_graph=True` and read as `p.grad` for a Hessian product.
    - Test code, which may check that the error is raised.

    ## Fix safety
    No fix: whether the no-grad block should shrink, or the backward move
    out of an evaluation helper, is the author's call.

    ## Verification
    The probe runs the code to the backward: confirmed when it raises
    "element 0 of tensors does not require grad", refuted when it runs
    through. For a loss forced to require grad, it reads the tensor the
    backward starts from: confirmed when it is a leaf whose graph reaches
    no parameter, refuted when it has a `grad_fn`. When the finding says a caller's `inference_mode()` (or a
    script-level `set_grad_enabled(False)`) turns autograd off, the probe runs
    the code under it and says so: the verdict is then `plausible`. So it
    does when the finding names the call that runs the function with
    autograd off (`when fit is called in main.py (line 11)`).

    ## References
    - PyTorch docs, "Locally disabling gradient computation".
    """

    code = "DL302"
    name = "backward-under-no-grad"
    message = "`{call}` {outcome}: `{tensor}` is computed with autograd off (line {line}){note}"
    _CALLED_OFF = (
        "`{call}` runs `{backward}` (line {line}) with autograd off, as this call is made inside a no-grad region:"
        " it raises \"element 0 of tensors does not require grad\""
    )
    harm = "raises"
    default_enabled = True

    valid = [
        # A loss built with autograd on, backpropagated inside no_grad: that works.
        """
        import torch
        from torch import nn

        net = nn.Linear(4, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for x, y in [(torch.randn(8, 4), torch.randn(8, 1))]:
            loss = nn.functional.mse_loss(net(x), y)
            opt.zero_grad()
            with torch.no_grad():
                loss.backward()
                opt.step()
        """,
        # Computed with autograd on, backward under no_grad: fine.
        """
        import torch

        def step(model, x, y, criterion, optimizer):
            loss = criterion(model(x), y)
            with torch.no_grad():
                loss.backward()
            optimizer.step()
        """,
        # enable_grad inside no_grad.
        """
        import torch

        @torch.no_grad()
        def attack(model, x, y, criterion):
            with torch.enable_grad():
                x = x.clone().requires_grad_()
                loss = criterion(model(x), y)
                loss.backward()
            return x.grad.sign()
        """,
        # A runtime flag: the mode is not known.
        """
        import torch

        def run(model, x, y, criterion, optimizer, train):
            with torch.set_grad_enabled(train):
                loss = criterion(model(x), y)
            if train:
                loss.backward()
                optimizer.step()
        """,
        # enable_grad inside the no_grad a validation loop runs the step under.
        """
        import torch

        class LitModel(torch.nn.Module):
            def validation_step(self, batch, batch_idx):
                x, y = batch
                with torch.enable_grad():
                    x = x.clone().requires_grad_(True)
                    out = self(x).sum()
                    grads = torch.autograd.grad(out, x)[0]
                return grads.norm()

        def validate(model, loader):
            model.eval()
            with torch.no_grad():
                for i, batch in enumerate(loader):
                    model.validation_step(batch, i)
        """,
        # Gradients read under no_grad keep the graph `create_graph=True` built.
        """
        import torch

        class Hessian(torch.optim.Optimizer):
            @torch.no_grad()
            def set_hessian(self, params):
                grads = [p.grad for p in params]
                zs = [torch.randint_like(p, 0, 2) * 2.0 - 1.0 for p in params]
                h_zs = torch.autograd.grad(grads, params, grad_outputs=zs)
                for h_z, z, p in zip(h_zs, zs, params):
                    p.hess += h_z * z
        """,
        # The backward only runs when the caller asks for training.
        """
        import torch

        def run_batch(model, x, y, criterion, optimizer, train):
            loss = criterion(model(x), y)
            if train:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            return loss.item()

        def validate(model, loader, criterion, optimizer):
            with torch.no_grad():
                return [run_batch(model, x, y, criterion, optimizer, train=False) for x, y in loader]
        """,
        # A test that checks the error.
        """
        import pytest
        import torch

        def test_backward_needs_grad():
            with torch.no_grad():
                loss = torch.ones(2, requires_grad=True).sum()
            with pytest.raises(RuntimeError):
                loss.backward()
        """,
    ]

    invalid = [
        # An attack helper run from an evaluation under no_grad: its backward has no graph.
        Invalid(
            """
            import torch
            from torch import nn

            def perturb(net, x, y, eps=0.1):
                x = x.clone().requires_grad_()
                nn.functional.cross_entropy(net(x), y).backward()
                return x + eps * x.grad.sign()

            def robust_accuracy(net, pairs):
                with torch.no_grad():
                    return [(net(perturb(net, x, y)).argmax(1) == y).float().mean() for x, y in pairs]

            net = nn.Linear(4, 3)
            robust_accuracy(net, [(torch.randn(8, 4), torch.randint(0, 3, (8,)))])
            """,
            line=6,
            message="raises \"element 0 of tensors does not require grad\"",
        ),
        # A self-adapting model called, through a helper, under the evaluation's no_grad.
        Invalid(
            """
            import torch
            from torch import nn

            class TTA(nn.Module):
                def __init__(self, net):
                    super().__init__()
                    self.net = net
                    self.optimizer = torch.optim.SGD(self.net.parameters(), lr=1e-3)

                def forward(self, x):
                    logits = self.net(x)
                    entropy = -(logits.softmax(1) * logits.log_softmax(1)).sum(1).mean()
                    self.optimizer.zero_grad()
                    entropy.backward()
                    self.optimizer.step()
                    return logits.detach()

            def predict(model, x):
                return model(x).argmax(1)

            def evaluate(model, loader):
                with torch.no_grad():
                    return [predict(model, x) for x, _ in loader]

            def main(net, loader):
                model = TTA(net)
                return evaluate(model, loader)
            """,
            line=14,
            message="when `forward` is called on line 19, where autograd is off",
        ),
        # `enable_grad()` does not lift the inference mode the loop runs `test_step` under.
        Invalid(
            """
            import torch

            class LitModel(torch.nn.Module):
                def test_step(self, batch, batch_idx):
                    x, y = batch
                    with torch.enable_grad():
                        x = x.clone().requires_grad_(True)
                        out = self(x).sum()
                        grads = torch.autograd.grad(out, x)[0]
                    return grads.norm()

            def test(model, loader):
                model.eval()
                with torch.inference_mode():
                    for i, batch in enumerate(loader):
                        model.test_step(batch, i)
            """,
            line=9,
            message="`enable_grad()` does not lift `inference_mode()`",
        ),
        Invalid(
            """
            import torch

            def train_step(model, x, y, criterion, optimizer):
                with torch.no_grad():
                    out = model(x)
                    loss = criterion(out, y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """,
            line=8,
            column=5,
            message="`loss` is computed with autograd off (line 6)",
        ),
        Invalid(
            """
            import torch

            def fit(model, x, y, optimizer):
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()

            def tune(model, x, y, optimizer):
                with torch.no_grad():
                    fit(model, x, y, optimizer)
            """,
            line=5,
            message="when `fit` is called on line 10, where autograd is off",
        ),
        Invalid(
            """
            import torch

            @torch.inference_mode()
            def fine_tune(model, loader, optimizer):
                for x, y in loader:
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                    loss.backward()
                    optimizer.step()
            """,
            line=7,
        ),
        Invalid(
            """
            import torch

            def update(model, batch, optimizer):
                with torch.no_grad():
                    model(batch).mean().backward()
                optimizer.step()
            """,
            line=5,
        ),
        Invalid(
            """
            import torch

            def fit_step(model, x, y):
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.requires_grad_(True)
                return loss

            @torch.inference_mode()
            def adapt(model, x, y, optimizer):
                loss = fit_step(model, x, y)
                loss.backward()
                optimizer.step()
            """,
            line=11,
            message="reaches no parameter, so nothing trains: `loss` is computed with autograd off (line 10), and `fit_step` forces it to require grad (line 5)",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        tensor = self.facts.values.backward_target(node)
        if tensor is None and self.facts.names.qualified(node.func) == "torch.autograd.grad":
            tensor = next((a.value for a in node.args if a.keyword is None or a.keyword.value == "outputs"), None)
        if tensor is None or self.facts.intent.is_test_code(node):
            return
        computed_at = self._computed_at(tensor, node)
        if computed_at is None:
            return
        mode = self.facts.grad_mode.mode_at(computed_at)
        found = self._note(computed_at) if mode is Mode.DISABLED else self._caller_note(computed_at, node) if mode is None else None
        if found is None or (mode is Mode.DISABLED and self._skippable_by_callers(computed_at, node)):
            return
        note, called = found
        outcome = "raises \"element 0 of tensors does not require grad\""
        value = computed_at.value if isinstance(computed_at, (cst.Assign, cst.AnnAssign)) else None
        forced = self.facts.values.forced_on_return(value) if isinstance(value, cst.Call) else None
        if forced is not None:
            # The helper hides the error: backward runs from a new leaf.
            callee = self.facts.index.enclosing(forced, cst.FunctionDef)
            outcome = "reaches no parameter, so nothing trains"
            note += f", and `{callee.name.value}` forces it to require grad (line {self.facts.line_of(forced)}), which only makes it a new leaf"
        self.report(
            node,
            outcome=outcome,
            call=self.facts.module.code_for_node(node),
            tensor=self.facts.module.code_for_node(tensor),
            line=str(self.facts.line_of(computed_at)),
            note=note,
            # Off because of where the function is called: the reproduction runs it so.
            details={"called_with_grad_off": called} if called else None,
        )

    def finish(self) -> None:
        """The interpreter's view: a backward that ran, in every context the
        file gives it, with autograd off, here or in a caller."""
        facts = self.facts
        reported = {facts.line_of(r.node) for r in self.reports}
        left_off = {backward for _, backward in facts.interpreter.grad_mode_left_off()}  # DL303's, at the call that left it off
        for node in facts.interpreter.backwards_with_autograd_off():
            if node in left_off:
                continue
            if not isinstance(node, cst.Call) or facts.line_of(node) in reported or facts.intent.is_test_code(node):
                continue
            tensor = facts.values.backward_target(node)
            if tensor is None and node.args:
                tensor = node.args[0].value
            if tensor is None:
                continue
            reported.add(facts.line_of(node))
            self.report(
                node,
                outcome="raises \"element 0 of tensors does not require grad\"",
                call=facts.module.code_for_node(node),
                tensor=facts.module.code_for_node(tensor),
                line=str(facts.line_of(node)),
                note=", inside a region its callers run with autograd off",
            )
        self._called_with_autograd_off(reported)

    def _called_with_autograd_off(self, reported: set) -> None:
        """A function whose backward runs fine elsewhere, called inside a no-grad region."""
        facts = self.facts
        for call, backward in facts.interpreter.backwards_run_with_autograd_off():
            if facts.line_of(call) in reported or facts.line_of(backward) in reported or facts.intent.is_test_code(call):
                continue
            reported.add(facts.line_of(call))
            self.report(
                call,
                template=self._CALLED_OFF,
                call=brief(facts.module.code_for_node(call)),
                backward=brief(facts.module.code_for_node(backward)),
                line=str(facts.line_of(backward)),
            )

    def _skippable_by_callers(self, computed_at: cst.CSTNode, call: cst.Call) -> bool:
        """Autograd is off only because every caller turns it off, and an
        `if` of the function decides whether the backward runs
        (`if train: loss.backward()` called with `train=False`)."""
        facts = self.facts
        source = facts.grad_mode.disabled_by(computed_at)
        if not isinstance(source, cst.FunctionDef) or facts.grad_mode.function_setter(source) is not None:
            return False
        return branched(call, source, facts.index)

    def _caller_note(self, computed_at: cst.CSTNode, call: cst.Call) -> Optional[Tuple[str, str]]:
        """When the function computing and backpropagating the loss also
        runs from a caller with autograd off (through calls no `if`
        decides): (the note saying where, that place: `on line 19`)."""
        facts = self.facts
        function = facts.index.enclosing(call, cst.FunctionDef)
        if function is None or facts.index.enclosing(computed_at, cst.FunctionDef) is not function:
            return None
        if branched(call, function, facts.index) or branched(computed_at, function, facts.index):
            return None  # `if train: loss.backward()`: the caller may skip it
        found = facts.values.caller_without_grad(function)
        if found is not None:
            return self._called(function, f"on line {facts.line_of(found[0])}", found[0])
        elsewhere = facts.grad_mode.disabled_elsewhere(function)
        if elsewhere is not None:
            return self._called(function, f"in {elsewhere.path} (line {elsewhere.line})")
        return None

    def _called(self, function: cst.FunctionDef, where: str, site: Optional[cst.Call] = None) -> Tuple[str, Optional[str]]:
        """The note naming the call that runs `function` with autograd off,
        and that place for the reproduction, which runs the function the
        same way; unless a script-level `set_grad_enabled(False)` turns it
        off there, which the reproduction finds by itself."""
        note = f" when `{function.name.value}` is called {where}, where autograd is off"
        if site is not None and isinstance(self.facts.grad_mode.disabled_by(site), cst.SimpleStatementLine):
            return note, None
        return note, where

    def _note(self, computed_at: cst.CSTNode) -> Tuple[str, Optional[str]]:
        """Why a `with torch.enable_grad():` around the computation did not
        help, or where the function is called with autograd off when that
        is what turns it off; with that place."""
        for ancestor in self.facts.index.ancestors(computed_at):
            if isinstance(ancestor, cst.With) and any(
                self.facts.grad_mode.mode_of(item.item) is Mode.ENABLED for item in ancestor.items
            ):
                return ": `enable_grad()` does not lift `inference_mode()`", None
        facts = self.facts
        source = facts.grad_mode.disabled_by(computed_at)
        if isinstance(source, cst.FunctionDef) and facts.grad_mode.function_setter(source) is None:
            sites = facts.grad_mode.call_sites(source)
            if sites:
                return self._called(source, f"on line {facts.line_of(sites[0])}", sites[0])
            elsewhere = facts.grad_mode.callers_elsewhere(source)
            if elsewhere:
                return self._called(source, f"in {elsewhere[0].path} (line {elsewhere[0].line})")
        return "", None

    def _computed_at(self, tensor: cst.BaseExpression, call: cst.Call) -> Optional[cst.CSTNode]:
        """Where `tensor` was computed: its one assignment for a name, the
        call itself for an expression; None when that is not certain."""
        if isinstance(tensor, cst.Subscript) and isinstance(tensor.value, cst.Name):
            tensor = tensor.value  # `losses["loss"]`: where `losses` was computed
        if isinstance(tensor, cst.Name):
            entries = self.facts.values.scope(tensor).assignments.get(tensor.value, [])
            if len(entries) != 1 or not self.facts.index.before(entries[0][1], call):
                return None
            node = entries[0][1]
            if not isinstance(node, (cst.Assign, cst.AnnAssign)) or not self._computes(entries[0][2]):
                return None
            return node
        if isinstance(tensor, (cst.Call, cst.BinaryOperation, cst.UnaryOperation, cst.Subscript)) and self._computes(tensor):
            return call
        return None

    def _computes(self, value: Optional[cst.BaseExpression]) -> bool:
        """Whether `value` runs an operation autograd would record, rather
        than reading tensors made elsewhere (`grads = [p.grad for p in
        params]` under no_grad keeps the graph `backward(create_graph=True)`
        built)."""
        if value is None:
            return False
        if isinstance(value, (cst.Call, cst.BinaryOperation, cst.UnaryOperation)):
            return True
        index = self.facts.index
        return any(True for kind in (cst.Call, cst.BinaryOperation, cst.UnaryOperation) for _ in index.descendants(value, kind))
