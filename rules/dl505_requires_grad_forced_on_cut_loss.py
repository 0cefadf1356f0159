from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst

from detachlint.analysis.values import Holds
from detachlint.analysis.vocabulary import DEVICE_DTYPE_CASTS, NEW_VALUE_FUNCTIONS, TO_PYTHON_METHODS, VARIABLE_CLASSES
from detachlint.rule import Invalid, Rule, brief

# What a forced value may go through on its way to backward and still be
# "the same loss": reductions and casts, not arithmetic, a model or a function.
_REDUCTIONS = DEVICE_DTYPE_CASTS | {"sum", "mean", "squeeze", "view", "reshape"}
# Wrappers that make a new leaf from a value when asked for requires_grad.
_WRAPPERS = VARIABLE_CLASSES | {"torch.tensor", "torch.as_tensor"}
# Calls whose result is cut from the graph.
_CUTTING_METHODS = TO_PYTHON_METHODS | {"detach"}
_CUTS = Holds.DETACHED | Holds.DATA | Holds.NUMBER


def _is_true(expr: Optional[cst.BaseExpression]) -> bool:
    return expr is None or (isinstance(expr, cst.Name) and expr.value == "True")


class RequiresGradForcedOnCutLoss(Rule):
    """`loss.requires_grad = True` to silence "does not require grad": nothing trains.

    ## What it does
    Flags `loss.requires_grad = True`, `loss.requires_grad_()` and
    `Variable(loss, requires_grad=True)` when that value is then
    backpropagated (directly or through loss arithmetic) or returned as a
    loss.

    ## Why is this bad?
    Setting `requires_grad` only changes leaves. When `loss` still has its
    graph, `requires_grad_()` does nothing, assigning the flag raises "you
    can only change requires_grad flags of leaf variables", and
    `Variable(loss, requires_grad=True)` copies it into a new leaf, cut from
    the graph. When the graph was cut upstream (`.data`,
    `.detach()`, `.item()`, a numpy round trip, a forward under no_grad),
    `backward()` raises "element 0 of tensors does not require grad and does
    not have a grad_fn", and forcing the flag silences exactly that error:
    `loss` becomes a new leaf, backward stops at it, no parameter gets a
    gradient, and training runs for hours learning nothing. The fix is to
    find the cut, not to hide it.

    ## Example
    ```python
    import torch

    def train_step(model, optimizer, x, y):
        out = model(x).detach()
        loss = torch.nn.functional.mse_loss(out, y)
        loss.requires_grad = True
        loss.backward()
        optimizer.step()
    ```

    Use instead:
    ```python
    import torch

    def train_step(model, optimizer, x, y):
        out = model(x)
        loss = torch.nn.functional.mse_loss(out, y)
        loss.backward()
        optimizer.step()
    ```

    ## Not flagged
    - A leaf made from new values (`torch.rand(3) + 1`, then the flag): it
      never had a graph, nothing was cut.
    - Inputs made to require grad before they go through a model: saliency
      maps, adversarial examples, the WGAN-GP interpolates, an image being
      optimised (neural style), an embedding output forced in a hook.
    - `requires_grad_(False)` and `requires_grad = False`.
    - A flag forced in code that runs with autograd off altogether (a step
      under `@torch.inference_mode()`, or only ever called from one): the
      cut is the grad mode itself, and DL302 reports the backward.

    ## Fix safety
    No fix: the cut is somewhere upstream, and only the author knows
    whether it was meant.

    ## Verification
    The probe reads the forced value just before the statement and just
    after it, and watches the backward that follows: confirmed when the
    value had no graph (also with the synthesized inputs made to require
    grad) or the statement made a new leaf of it, and the backward reaches
    no parameter, which keep `grad None`; refuted when the value kept its
    graph (the statement is a no-op), or when setting the flag on that
    non-leaf raises.

    ## References
    - PyTorch docs, "Autograd mechanics: requires_grad" and `torch.Tensor.requires_grad_`.
    """

    code = "DL505"
    name = "requires-grad-forced-on-cut-loss"
    message = "`{statement}` {effect}: {fate} then reaches no parameter, so nothing trains; {advice}"
    harm = "wrong-gradients"
    default_enabled = True

    valid = [
        # A detached copy made a leaf to read the gradient with respect to it.
        """
        import torch
        from torch import nn

        def saliency(net, xs):
            feats = net(xs).detach()
            feats.requires_grad = True
            feats.pow(2).sum().backward()
            return feats.grad

        net = nn.Linear(4, 2)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for xs in [torch.randn(8, 4)]:
            print(saliency(net, xs))
            opt.zero_grad()
            net(xs).sum().backward()
            opt.step()
        """,
        # An input made to require grad, then fed to the model.
        """
        import torch

        def saliency(model, images, labels):
            images.requires_grad = True
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            loss.backward()
            return images.grad
        """,
        """
        import torch

        def gradient_penalty(critic, real, fake):
            alpha = torch.rand(real.size(0), 1)
            interpolates = (alpha * real + (1 - alpha) * fake.detach()).requires_grad_(True)
            scores = critic(interpolates)
            grads = torch.autograd.grad(scores.sum(), interpolates, create_graph=True)[0]
            return ((grads.norm(2, dim=1) - 1) ** 2).mean()
        """,
        # Leaves made from data, and an input forced before the arithmetic that uses it.
        """
        import torch

        x = torch.tensor(1., requires_grad=True)
        w = torch.tensor(2., requires_grad=True)
        y = w * x + 3
        y.backward()

        def square_grad():
            a = torch.randn(1)
            a.requires_grad_()
            b = a * a
            b.backward()
            return a.grad

        def test_backward_of_a_sum():
            t = torch.rand(3, 3) + torch.ones(3, 3)
            t.requires_grad = True
            t.sum().backward()
            assert torch.equal(t.grad, torch.ones(3, 3))
        """,
        # The whole step runs under inference mode: DL302 reports the backward.
        """
        import torch
        import torch.nn.functional as F

        class Predictor:
            def fit_step(self, x, y):
                loss = F.mse_loss(self.model(x), y)
                if not loss.requires_grad:
                    loss.requires_grad_(True)
                return loss

            @torch.inference_mode()
            def predict(self, x, y):
                for _ in range(10):
                    self.optimizer.zero_grad()
                    loss = self.fit_step(x, y)
                    loss.backward()
                    self.optimizer.step()
                return self.model(x)
        """,
        # Turning it off is DL504's business.
        """
        import torch

        def targets(teacher, x):
            out = teacher(x).detach()
            out.requires_grad = False
            return out
        """,
    ]

    invalid = [
        # Per-stage losses re-packed into a new tensor: `backward()` runs, nothing trains.
        Invalid(
            """
            import torch
            from torch import nn

            class Unfold(nn.Module):
                def __init__(self, n=3):
                    super().__init__()
                    self.stages = nn.ModuleList(nn.Conv2d(3, 3, 3, padding=1) for _ in range(n))

                def forward(self, img):
                    outs, x = [], img
                    for stage in self.stages:
                        x = x + stage(x)
                        outs.append(x)
                    return outs

            net = Unfold()
            opt = torch.optim.Adam(net.parameters())
            l1 = nn.L1Loss()
            for noisy, clean in [(torch.rand(2, 3, 8, 8), torch.rand(2, 3, 8, 8))]:
                for p in net.parameters():
                    p.grad = None
                outs = net(noisy)
                loss = torch.tensor([l1(o, clean) for o in outs], requires_grad=True).sum()
                loss.backward()
                opt.step()
            """,
            line=23,
        ),
        # The helper forces the flag; its caller backpropagates and steps.
        Invalid(
            """
            import torch
            from torch import nn

            def objective(net, xs, ys):
                out = net(xs).detach()
                err = ((out - ys) ** 2).mean()
                err.requires_grad = True
                return err

            def fit(net, batches, opt):
                for xs, ys in batches:
                    opt.zero_grad()
                    objective(net, xs, ys).backward()
                    opt.step()

            net = nn.Linear(4, 1)
            fit(net, [(torch.randn(8, 4), torch.randn(8, 1))], torch.optim.SGD(net.parameters(), lr=0.1))
            """,
            line=7,
            message="whose graph was cut at `net(xs).detach()` (line 5), a new leaf",
        ),
        Invalid(
            """
            import torch

            def train_step(model, optimizer, x, y):
                out = model(x).detach()
                loss = torch.nn.functional.mse_loss(out, y)
                loss.requires_grad = True
                loss.backward()
                optimizer.step()
            """,
            line=6,
            message="`loss.requires_grad = True` makes `loss`, whose graph was cut at `out` (line 4), a new leaf",
        ),
        Invalid(
            """
            import torch
            from torch.autograd import Variable

            def fit(model, loss_op, batches, optim_op):
                for x, y in batches:
                    loss = loss_op(model(x), y)
                    loss = Variable(loss, requires_grad=True)
                    loss.backward()
                    optim_op.step()
            """,
            line=7,
            message="makes a new leaf of `loss`, cut from whatever graph `loss` had",
        ),
        Invalid(
            """
            import torch

            class Engine:
                def backward(self):
                    if self.d_loss.requires_grad is False:
                        self.d_loss.requires_grad = True
                    self.d_loss.backward()
            """,
            line=6,
            message="right after the `if` found its graph cut",
        ),
        Invalid(
            """
            import torch
            import torch.nn.functional as F

            class TripletLoss(torch.nn.Module):
                def forward(self, anchor, positive, negative):
                    losses = F.relu((anchor - positive).pow(2).sum(1) - (anchor - negative).pow(2).sum(1) + 1.0)
                    mean_loss = losses.mean()
                    mean_loss.requires_grad = True
                    return mean_loss
            """,
            line=8,
            message="raises \"you can only change requires_grad flags of leaf variables\" while `mean_loss` has a graph",
        ),
    ]

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            flag = target.target
            if isinstance(flag, cst.Attribute) and flag.attr.value == "requires_grad" and _is_true(node.value):
                self._check(node, flag.value)
        if len(node.targets) == 1 and isinstance(node.value, cst.Call):
            call = node.value
            wrapped = call.args[0].value if call.args and call.args[0].keyword is None else None
            if self.facts.names.qualified(call.func) in _WRAPPERS and isinstance(wrapped, (cst.Name, cst.Attribute)) and any(
                arg.keyword is not None and arg.keyword.value == "requires_grad" and _is_true(arg.value)
                for arg in call.args
            ):
                self._check(node, node.targets[0].target, source=call.args[0].value if call.args else None)

    def visit_Expr(self, node: cst.Expr) -> None:
        call = node.value
        if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value == "requires_grad_":
            if not call.args or _is_true(call.args[0].value):
                self._check(node, call.func.value)

    def _check(self, node: cst.CSTNode, forced: cst.BaseExpression, source: Optional[cst.BaseExpression] = None) -> None:
        if not isinstance(forced, (cst.Name, cst.Attribute)):
            return
        if self.facts.grad_mode.disabled_by(node) is not None:
            return  # the whole step runs with autograd off: DL302 reports its backward
        code = self.facts.module.code_for_node
        name = code(forced)
        if self.facts.values.from_new_values(forced):
            return  # a leaf made from new data on purpose (`t = a + b` of `torch.rand`s): there was no graph to cut
        fate = self._fate(node, forced, name)
        if fate is None:
            return
        effect = self._effect(node, forced, name, source if source is not None else forced)
        statement = code(node).strip()
        self.report(node, statement=statement, effect=effect, fate=fate, advice="find where the graph was cut instead")

    def finish(self) -> None:
        """The interpreter's view, whatever the loss is called and wherever it
        is backpropagated: a backward whose graph reaches only a leaf forced
        onto a value whose graph was cut."""
        facts = self.facts
        reported = {facts.line_of(r.node) for r in self.reports}
        for forcing, cuts, backward in facts.interpreter.forced_backpropagated():
            statement = facts.index.enclosing(forcing, cst.SimpleStatementLine)
            if statement is None or facts.line_of(statement) in reported or facts.intent.is_test_code(statement):
                continue
            reported.add(facts.line_of(statement))
            fate = f"`{facts.module.code_for_node(backward).strip()}` on line {facts.line_of(backward)}"
            if isinstance(forcing, cst.Call) and not _is_method_call(forcing, "requires_grad_"):
                # `torch.tensor([...], requires_grad=True)`: the values copied into a new leaf, their graph left behind.
                values = facts.module.code_for_node(forcing.args[0].value) if forcing.args else "its input"
                values = values if len(values) <= 40 and "\n" not in values else values[:37] + "..."
                self.report(
                    forcing,
                    statement=brief(facts.module.code_for_node(forcing)),
                    effect=f"copies the values of `{values}` into a new leaf and leaves their graph behind",
                    fate=fate,
                    advice="combine the tensors themselves (`torch.stack`, `sum`) instead",
                )
                continue
            forced = forcing.value if isinstance(forcing, cst.Attribute) else forcing.func.value if isinstance(forcing, cst.Call) and isinstance(forcing.func, cst.Attribute) else forcing
            cut = min(cuts, key=facts.line_of)
            text = facts.module.code_for_node(cut)
            text = text if len(text) <= 40 and "\n" not in text else "..."
            self.report(
                statement.body[0],
                statement=facts.module.code_for_node(statement.body[0]).strip(),
                effect=f"makes `{facts.module.code_for_node(forced)}`, whose graph was cut at `{text}` (line {facts.line_of(cut)}), a new leaf",
                fate=fate,
                advice="find where the graph was cut instead",
            )

    def _fate(self, node: cst.CSTNode, forced: cst.BaseExpression, name: str) -> Optional[str]:
        """How the forced value ends as a loss: "`loss.backward()` on line N"
        (backward on the value itself or a reduction of it), or "the loss `f`
        returns"; None when it goes on into arithmetic or a model, as an
        input made to require grad does."""
        index = self.facts.index
        scope = index.scope_of(node)
        code = self.facts.module.code_for_node
        same = {name}
        for call in index.descendants(scope, cst.Call):
            if not index.before(node, call):
                continue
            target = self.facts.values.backward_target(call)
            if target is not None and _reduction_of(target, same, code):
                return f"`{code(call)}` on line {self.facts.line_of(call)}"
        if isinstance(scope, cst.FunctionDef) and "loss" in name.lower() + scope.name.value.lower() + _class_name(index, scope):
            for returned in index.descendants(scope, cst.Return):
                if returned.value is not None and index.before(node, returned) and _reduction_of(returned.value, same, code):
                    return f"backward from the loss `{scope.name.value}` returns"
        return None

    def _effect(self, node: cst.CSTNode, forced: cst.BaseExpression, name: str, source: cst.BaseExpression) -> str:
        cut = self._cut_input(source, node, depth=0)
        if cut is not None:
            where = f"`{cut[0].value}` (line {self.facts.line_of(cut[1])})"
            return f"makes `{name}`, whose graph was cut at {where}, a new leaf"
        guard = self.facts.index.enclosing(node, cst.If)
        if guard is not None and _checks_flag(guard.test, self.facts.module.code_for_node(forced), self.facts.module.code_for_node):
            return f"makes `{name}` a new leaf, right after the `if` found its graph cut"
        if source is not forced:
            # `Variable(loss, requires_grad=True)`, `torch.tensor(loss, ...)`: always a copy cut from the graph.
            return f"makes a new leaf of `{name}`, cut from whatever graph `{name}` had"
        if isinstance(node, cst.Assign):
            # Assigning the flag on a non-leaf raises; only a leaf (a cut value) accepts it.
            return f"raises \"you can only change requires_grad flags of leaf variables\" while `{name}` has a graph, and once the graph is cut it makes `{name}` a new leaf"
        return f"does nothing while `{name}` has a graph, and once the graph is cut it makes `{name}` a new leaf"

    def _cut_input(self, expr: cst.BaseExpression, at: cst.CSTNode, depth: int) -> Optional[Tuple[cst.Name, cst.CSTNode]]:
        """A name `expr` is computed from whose graph is known to be cut, and where it was."""
        values = self.facts.values
        if depth > 3:
            return None
        for read in ([expr] if isinstance(expr, cst.Name) else list(self.facts.index.descendants(expr, cst.Name))):
            if not isinstance(read, cst.Name) or self.facts.index.is_receiver(read) or self.facts.names.qualified(read) is not None:
                continue
            entry = values.scope(read).assignment_before(read.value, read)
            if depth and values.holds(read) & _CUTS:
                return read, entry[1] if entry is not None else read
            if entry is None or entry[2] is None:
                continue
            value = entry[2]
            found = self._cut_input(value, read, depth + 1)
            if found is not None:
                return found
            if _is_cut(value) or (
                isinstance(value, cst.Call)
                and (self.facts.names.qualified(value.func) or "").startswith("torch.")
                and self.facts.names.qualified(value.func) not in NEW_VALUE_FUNCTIONS
                and values.computed_without_graph(value)
            ):
                return read, entry[1]
        return None


def _is_cut(value: cst.BaseExpression) -> bool:
    """`x.detach()`, `x.item()`, `x.numpy()`, `x.data`."""
    if isinstance(value, cst.Attribute):
        return value.attr.value == "data"
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value in _CUTTING_METHODS


def _reduction_of(expr: cst.BaseExpression, names, code) -> bool:
    """Whether `expr` is one of `names`, or a reduction or cast of it."""
    if isinstance(expr, (cst.Name, cst.Attribute)) and code(expr) in names:
        return True
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value in _REDUCTIONS:
        return _reduction_of(expr.func.value, names, code)
    return False


def _checks_flag(test: cst.BaseExpression, name: str, code) -> bool:
    """`x.requires_grad is False`, `not x.requires_grad`, `x.requires_grad == False`."""
    text = code(test).replace(" ", "")
    return text in (f"{name}.requires_grad==False", f"{name}.requires_gradisFalse", f"not{name}.requires_grad")


def _class_name(index, function: cst.FunctionDef) -> str:
    parent = index.parent(function)
    owner = index.parent(parent) if parent is not None else None
    return owner.name.value.lower() if isinstance(owner, cst.ClassDef) else ""


def _is_method_call(call: cst.Call, name: str) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == name
