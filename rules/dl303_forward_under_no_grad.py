from __future__ import annotations

from functools import cached_property
from typing import Iterator, Optional, Set

import libcst as cst

from detachlint.analysis.grad_mode import Mode
from detachlint.analysis.loops import LoopFacts
from detachlint.analysis.loss_terms import LossTerms
from detachlint.analysis.values import Holds
from detachlint.rule import Invalid, Rule


class ForwardUnderNoGrad(Rule):
    """A training step whose forward pass runs under `no_grad`.

    ## What it does
    Flags a model's forward pass computed under `torch.no_grad()`,
    `torch.inference_mode()` or `torch.set_grad_enabled(False)` when, with
    autograd back on, its output feeds a loss term (with the targets and
    other plain data only) that is backpropagated before an
    `optimizer.step()` in the same function. Also flags a module class
    whose `forward` is decorated with `@torch.inference_mode()` when an
    instance is called with autograd on in a file that trains (a
    `backward()` followed by an optimizer step): a padding module returned
    by a forward pre-hook of the backbone being trained, say. And a call
    of a function or method of the file decorated with `@torch.no_grad()`
    (a `generate()` used to embed queries) whose outputs alone, with plain
    data, become the loss that the file backpropagates before a step,
    through the values returned to the callers. The program is followed as
    it runs, so the forward may be a model handed to a function, a member
    called in a method, or a helper whose `with torch.no_grad():` output
    its caller turns into the loss; what counts is that the loss
    backpropagated has no graph left and the forward's `with` block is
    where it was dropped (a loss computed inside the block is DL302's).

    ## Why is this bad?
    The forward pass recorded no graph, so the loss computed from its
    output afterwards has no path back to the model's parameters:
    `backward()` raises "element 0 of tensors does not require grad" when
    this is the whole loss, and otherwise the optimizer steps with no
    gradient from it. It happens when a `with torch.no_grad():` block copied
    from evaluation code is left around the forward pass, or when the
    forward is moved into a helper that runs under `inference_mode`.

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
    - A module whose `forward` is decorated with `@torch.no_grad()` (a
      rotary embedding's cache): its outputs are ordinary tensors without
      graph. An `@torch.inference_mode()` forward only called under
      `no_grad`, or in a file that trains nothing.
    - A network run under `no_grad` to produce a target, a teacher's soft
      labels or a generator's samples for a discriminator step: the loss
      also holds a live output (`criterion(D(fake), ones)`,
      `kl_div(student_logp, teacher_probs)`).
    - A `no_grad` output used as a weight or mask next to a live tensor.
    - Outputs of a `@torch.no_grad()` method used as targets next to a live
      prediction (`labels = model.generate(x)` then
      `criterion(model(x), labels)`): pseudo-labelling.
    - No `backward()` followed by an optimizer step in the same function
      (evaluation code that also computes the loss).
    - A loss computed inside the `no_grad` block itself: DL302 reports the
      `backward()`.
    - `torch.set_grad_enabled(flag)` with a runtime flag, a project's own
      wrappers whose effect is not certain, and test code.

    ## Fix safety
    No fix: moving statements out of the `with` block changes what else
    runs with autograd on, which is the author's call.

    ## Verification
    The probe runs the step with synthesized inputs and looks at the
    forward's output: confirmed when it has `requires_grad=False` and no
    `grad_fn`, and the backward after it raises "does not require grad" or
    runs on the loss's other terms only; refuted when the output requires
    grad at run time (a model that turns autograd back on in its own
    `forward`). A function under `inference_mode()` whose outputs the file
    hands to training code: that training code runs as the file calls it;
    confirmed when it raises "Inference tensors cannot be saved for
    backward" after the function ran, refuted when it runs through.

    ## References
    - PyTorch docs, "Locally disabling gradient computation".
    """

    code = "DL303"
    name = "forward-under-no-grad"
    message = "`{forward}` runs with autograd off (`{mode}`, line {mode_line}){consequence}"
    _NO_GRADIENT = ", yet `{term}` built from it is backpropagated (line {line}) before `{step}`: the step gets no gradient from this loss"
    _INFERENCE = ": its outputs are inference tensors, and the call on line {call} hands them, with autograd on, to code that trains (`{backward}`, line {line}): \"Inference tensors cannot be saved for backward\" is raised when a trained layer reads them"
    _LEFT_OFF = (
        "`{setter}` leaves autograd off when `{function}` returns: what its callers compute next records no graph,"
        " and `{backward}` (line {line}) raises \"element 0 of tensors does not require grad\""
    )
    harm = "wrong-gradients"
    default_enabled = True

    valid = [
        # Pseudo-labels from a no_grad method, a live prediction in the loss.
        """
        import torch
        from torch import nn
        import torch.nn.functional as F

        class Tagger(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 4)

            def forward(self, x):
                return self.fc(x)

            @torch.no_grad()
            def predict(self, x):
                return self(x).argmax(-1)

        def self_train(model, loader, optimizer):
            for x in loader:
                labels = model.predict(x)
                loss = F.cross_entropy(model(x), labels)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """,
        # `@torch.no_grad()` on a forward: ordinary tensors without graph.
        """
        import torch
        from torch import nn

        class RotaryEmbedding(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim)))

            @torch.no_grad()
            def forward(self, x, position_ids):
                freqs = position_ids[..., None].float() * self.inv_freq
                return freqs.cos(), freqs.sin()

        def train_step(model, rope, x, pos, y, optimizer):
            cos, sin = rope(x, pos)
            loss = ((model(x * cos + x * sin) - y) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        """,
        # An inference-mode module only used in a file that does not train.
        """
        import torch
        from torch import nn

        class Normalize(nn.Module):
            @torch.inference_mode()
            def forward(self, x):
                return (x - x.mean()) / x.std()

        def predict(model, x):
            return model(Normalize()(x)).argmax(-1)
        """,
        # The forward pass with autograd on.
        """
        import torch

        def train_step(model, x, y, criterion, optimizer):
            out = model(x)
            loss = criterion(out, y)
            loss.backward()
            optimizer.step()
        """,
        # A GAN's discriminator step: the samples come from no_grad on purpose.
        """
        import torch
        import torch.nn.functional as F

        def d_step(G, D, z, real, opt_d):
            with torch.no_grad():
                fake = G(z)
            loss = F.binary_cross_entropy_with_logits(D(fake), torch.zeros(len(fake), 1))
            loss.backward()
            opt_d.step()
        """,
        # Distillation: the teacher under no_grad, the student live.
        """
        import torch
        import torch.nn.functional as F

        def distill_step(student, teacher, x, optimizer, T=2.0):
            with torch.no_grad():
                soft = F.softmax(teacher(x) / T, dim=-1)
            loss = F.kl_div(F.log_softmax(student(x) / T, dim=-1), soft, reduction="batchmean")
            loss.backward()
            optimizer.step()
        """,
        # Evaluation: no backward, no step.
        """
        import torch

        def evaluate(model, loader, criterion):
            total = 0.0
            for x, y in loader:
                with torch.no_grad():
                    out = model(x)
                total += criterion(out, y).item()
            return total
        """,
        # Pseudo-labels from no_grad, a live prediction on the labeled batch.
        """
        import torch
        import torch.nn.functional as F

        def semi_supervised_step(model, x_l, y_l, x_u, optimizer, threshold=0.95):
            with torch.no_grad():
                probs = F.softmax(model(x_u), dim=-1)
            conf, pseudo = probs.max(dim=-1)
            mask = (conf > threshold).float()
            loss = F.cross_entropy(model(x_l), y_l) + (F.cross_entropy(model(x_u), pseudo, reduction="none") * mask).mean()
            loss.backward()
            optimizer.step()
        """,
        # The loss inside the no_grad block: DL302's finding.
        """
        import torch

        def train_step(model, x, y, criterion, optimizer):
            with torch.no_grad():
                out = model(x)
                loss = criterion(out, y)
            loss.backward()
            optimizer.step()
        """,
        # A runtime flag: the mode is not known.
        """
        import torch

        def run(model, x, y, criterion, optimizer, train):
            with torch.set_grad_enabled(train):
                out = model(x)
            loss = criterion(out, y)
            loss.backward()
            optimizer.step()
        """,
    ]

    invalid = [
        # The model and the loss function are handed in; nothing is named like a model.
        Invalid(
            """
            import torch
            import torch.nn as nn

            def fit(g, upd, batches, crit):
                for xs, ys in batches:
                    upd.zero_grad()
                    with torch.no_grad():
                        guess = g(xs)
                    cost = crit(guess, ys)
                    cost.backward()
                    upd.step()

            if __name__ == "__main__":
                g = nn.Linear(4, 1)
                fit(g, torch.optim.SGD(g.parameters(), lr=0.1), [(torch.randn(8, 4), torch.randn(8, 1))], nn.L1Loss())
            """,
            line=8,
            message="`g(xs)` runs with autograd off (`torch.no_grad()`, line 7), yet `crit(guess, ys)` built from it is backpropagated (line 10) before `upd.step()`",
        ),
        # Embeddings taken from a no_grad `generate()`, through a helper, into the loss.
        Invalid(
            """
            import torch
            from torch import nn
            import torch.nn.functional as F

            class LM(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.embed = nn.Embedding(20, 16)

                def forward(self, ids):
                    return self.embed(ids)

                @torch.no_grad()
                def generate(self, ids):
                    return self(ids)

            class Retriever(nn.Module):
                def __init__(self, lm):
                    super().__init__()
                    self.lm = lm

                def encode(self, ids):
                    hidden = self.lm.generate(ids)
                    return F.normalize(hidden[:, -1], dim=-1)

                def forward(self, q, p):
                    scores = self.encode(q) @ self.encode(p).T
                    return F.cross_entropy(scores, torch.arange(scores.size(0)))

            def train(model, batches, optimizer):
                for q, p in batches:
                    loss = model(q, p)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()

            def main(batches):
                model = Retriever(LM())
                train(model, batches, torch.optim.AdamW(model.parameters()))
            """,
            line=23,
            message="`self.lm.generate(ids)` runs with autograd off (`@torch.no_grad()`, line 13)",
        ),
        # The no_grad method in the `if` branch, a trained call in the `else`:
        # on the cached path the loss has no graph.
        Invalid(
            """
            import torch
            from torch import nn

            class Retriever(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = nn.Linear(8, 8)

                @torch.no_grad()
                def embed(self, x):
                    return self.encoder(x)

            def train(model, loader, optimizer, use_cache):
                for x, y in loader:
                    if use_cache:
                        z = model.embed(x)
                    else:
                        z = model.encoder(x)
                    loss = ((z - y) ** 2).mean()
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            line=16,
            message="`model.embed(x)` runs with autograd off (`@torch.no_grad()`, line 9)",
        ),
        # A padding module in inference mode feeds the trained backbone through a pre-hook.
        Invalid(
            """
            import torch
            from torch import nn
            import torch.nn.functional as F

            class CenterPadding(nn.Module):
                def __init__(self, multiple):
                    super().__init__()
                    self.multiple = multiple

                @torch.inference_mode()
                def forward(self, x):
                    pad = (-x.shape[-1]) % self.multiple
                    return F.pad(x, (pad // 2, pad - pad // 2))

            def build(backbone, head):
                backbone.register_forward_pre_hook(lambda _, x: CenterPadding(14)(x[0]))
                return nn.Sequential(backbone, head)

            def train(model, loader, optimizer):
                for x, y in loader:
                    loss = F.mse_loss(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            line=10,
            message="`CenterPadding.forward` runs with autograd off (`@torch.inference_mode()`, line 10): its outputs are inference tensors",
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
            line=5,
            column=15,
            message="`model(x)` runs with autograd off (`torch.no_grad()`, line 4), yet `criterion(out, y)` built from it is backpropagated (line 8) before `optimizer.step()`",
        ),
        Invalid(
            """
            import torch
            import torch.nn.functional as F
            from torch import nn

            class Trainer:
                def __init__(self, model: nn.Module, optimizer):
                    self.model = model
                    self.optimizer = optimizer

                @torch.inference_mode()
                def predict(self, x):
                    return self.model(x)

                def fit(self, loader):
                    for images, labels in loader:
                        with torch.inference_mode():
                            logits = self.model(images)
                        loss = F.cross_entropy(logits, labels)
                        self.optimizer.zero_grad()
                        loss.backward()
                        self.optimizer.step()
            """,
            line=17,
        ),
        Invalid(
            """
            import torch

            def fit(model, dataloader, optimizer, scaler, weight_decay=1e-4):
                for inputs, targets in dataloader:
                    torch.set_grad_enabled(False)
                    preds = model(inputs)
                    torch.set_grad_enabled(True)
                    loss = ((preds - targets) ** 2).mean()
                    loss = loss + weight_decay * sum(p.pow(2).sum() for p in model.parameters())
                    scaler.scale(loss).backward()
                    scaler.step(optimizer)
            """,
            line=6,
            message="(`torch.set_grad_enabled(False)`, line 5)",
        ),
    ]

    def __init__(self, facts) -> None:
        super().__init__(facts)
        self._reported: Set[cst.CSTNode] = set()

    def visit_Call(self, node: cst.Call) -> None:
        self._check_decorated_callee(node)
        if not self.facts.shared("loops", LoopFacts).is_optimizer_step(node):
            return
        facts = self.facts
        if facts.intent.is_test_code(node):
            return
        scope = facts.values.scope(node)
        for assignment, forward in self._no_grad_forwards(scope.scope, node):
            if assignment in self._reported:
                continue
            found = self._backpropagated_term(assignment, node)
            if found is None:
                continue
            self._reported.add(assignment)
            term, backward = found
            source = facts.grad_mode.disabled_by(forward)
            consequence = self._NO_GRADIENT.format(
                term=facts.module.code_for_node(term),
                line=facts.line_of(backward),
                step=facts.module.code_for_node(node),
            )
            self.report(
                forward,
                forward=facts.module.code_for_node(forward),
                mode=_mode_text(source, facts),
                mode_line=str(facts.line_of(source)),
                consequence=consequence,
            )

    def finish(self) -> None:
        """The interpreter's view, wherever the forward and the loss are
        written: a backward, with autograd on, of a loss with no graph left,
        whose graph was dropped by a module or helper run with autograd off."""
        facts = self.facts
        interpreter = facts.interpreter
        events = interpreter.events
        reported = {r.node for r in self.reports}
        for i, event in enumerate(events):
            if event.kind != "backward" or event.grad is False or event.value.opaque or interpreter.in_graph_value(event.value):
                continue
            step = next((e for e in events[i + 1:] if e.kind in ("step", "backward")), None)
            if step is None or step.kind != "step" or not isinstance(event.node, cst.Call):
                continue
            for forward in event.value.cuts:
                if forward in reported or not isinstance(forward, cst.Call) or interpreter.grad_modes(forward) != {False}:
                    continue
                if not interpreter.dropped_parameters(forward) or facts.intent.is_test_code(forward):
                    continue
                source = facts.grad_mode.disabled_by(forward)
                if not isinstance(source, cst.With) or not self._loss_outside(event.node, source):
                    continue  # the loss itself computed with autograd off: DL302's case
                text = facts.module.code_for_node(forward)
                if len(text) > 60 or "\n" in text:
                    text = facts.module.code_for_node(forward.func) + "(...)"
                backward = event.node
                term = backward.args[0].value if not isinstance(backward.func, cst.Attribute) and backward.args else (
                    backward.func.value if isinstance(backward.func, cst.Attribute) else backward
                )
                self.report(
                    forward,
                    forward=text,
                    mode=_mode_text(source, facts),
                    mode_line=str(facts.line_of(source)),
                    consequence=self._NO_GRADIENT.format(
                        term=facts.module.code_for_node(term), line=facts.line_of(backward), step=facts.module.code_for_node(step.node)
                    ),
                )
                reported.add(forward)

        for setter, backward in interpreter.grad_mode_left_off():
            function = facts.index.enclosing(setter, cst.FunctionDef)
            self.report(
                setter,
                template=self._LEFT_OFF,
                setter=facts.module.code_for_node(setter),
                function=function.name.value,
                backward=facts.module.code_for_node(backward),
                line=str(facts.line_of(backward)),
            )

    def _loss_outside(self, backward: cst.Call, block: cst.With) -> bool:
        """The value `backward` backpropagates is bound outside `block`."""
        facts = self.facts
        target = backward.func.value if isinstance(backward.func, cst.Attribute) else (backward.args[0].value if backward.args else None)
        if target is None or facts.index.is_inside(target, block):
            return False
        if isinstance(target, cst.Name):
            return not any(facts.index.is_inside(binding, block) for binding, _ in facts.values.scope(target).reaching(target))
        return True

    @cached_property
    def _decorated_off(self) -> frozenset:
        """Names of the file's functions decorated (or rebound wrapped) to run with autograd off."""
        return frozenset(f.name.value for f in self.facts.index.nodes(cst.FunctionDef) if self._set_off(f) is not None)

    def _set_off(self, function: cst.FunctionDef):
        """(manager, where it is written) when `function` is set to run with autograd off."""
        grad_mode = self.facts.grad_mode
        setter = grad_mode.function_setter(function)
        return setter if setter is not None and grad_mode.mode_of(setter[0]) is Mode.DISABLED else None

    def _check_decorated_callee(self, node: cst.Call) -> None:
        """`self.encoder.generate(...)`, a method of the file decorated with
        `@torch.no_grad()`, whose outputs alone (with plain data) become the
        loss that a caller backpropagates before an optimizer step."""
        facts = self.facts
        func = node.func
        name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        if name not in self._decorated_off:
            return  # cheap first test: asked for every call of the file
        callees = facts.values.file_functions(node) or facts.intent.methods_called(node)
        if len(callees) != 1 or facts.grad_mode.mode_at(node) is not None or facts.intent.is_test_code(node):
            return
        setter = self._set_off(callees[0])
        if setter is None:
            return
        backward = facts.values.backward_reached_alone(node)
        if backward is None or facts.grad_mode.is_disabled(backward):
            return
        loops = facts.shared("loops", LoopFacts)
        scope = facts.index.scope_of(backward)
        step = next((
            c for c in facts.index.descendants(scope, cst.Call)
            if loops.is_optimizer_step(c) and facts.index.scope_of(c) is scope and facts.index.before(backward, c)
        ), None)
        if step is None:
            return
        forward = facts.module.code_for_node(node)
        if len(forward) > 60 or "\n" in forward:
            forward = facts.module.code_for_node(node.func) + "(...)"
        self.report(
            node,
            forward=forward,
            mode=_setter_text(setter, facts),
            mode_line=str(facts.line_of(setter[1])),
            consequence=self._NO_GRADIENT.format(
                term=facts.module.code_for_node(facts.values.backward_target(backward)),
                line=facts.line_of(backward),
                step=facts.module.code_for_node(step),
            ),
        )

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        """A module's `forward` decorated with `@torch.inference_mode()`,
        called with autograd on in a file that trains: whatever reads its
        outputs in the graph (the hooked backbone its pre-hook feeds) raises."""
        facts = self.facts
        if node.name.value != "forward" or facts.modules.class_of(node) is None or facts.intent.is_test_code(node):
            return
        setter = self._set_off(node)
        manager = setter[0] if setter is not None else None
        if manager is None or facts.names.qualified(manager.func if isinstance(manager, cst.Call) else manager) != "torch.inference_mode":
            return
        call = next((site for site in facts.values.callers(node) if facts.grad_mode.mode_at(site) is None), None)
        backward = self._training_backward()
        if call is None or backward is None:
            return
        self.report(
            setter[1],
            forward=f"{facts.modules.class_of(node).name}.forward",
            mode=_setter_text(setter, facts),
            mode_line=str(facts.line_of(setter[1])),
            consequence=self._INFERENCE.format(
                call=facts.line_of(call), backward=facts.module.code_for_node(backward), line=facts.line_of(backward)
            ),
        )

    def _training_backward(self) -> Optional[cst.Call]:
        """A `backward()` with autograd on, followed in its function by an optimizer step."""
        facts = self.facts
        loops = facts.shared("loops", LoopFacts)
        calls = list(facts.index.nodes(cst.Call))
        for call in calls:
            if facts.values.backward_target(call) is None or facts.grad_mode.is_disabled(call):
                continue
            scope = facts.index.scope_of(call)
            if any(loops.is_optimizer_step(c) and facts.index.scope_of(c) is scope and facts.index.before(call, c) for c in calls):
                return call
        return None

    def _no_grad_forwards(self, scope: cst.CSTNode, step: cst.Call) -> Iterator:
        """`(assignment, forward)` for `out = model(x)` run certainly under
        no-grad before `step`, in the step's function."""
        facts = self.facts
        for entries in facts.values.scope(scope).assignments.values():
            for _, assignment, value, _ in entries:
                if not isinstance(assignment, cst.Assign) or not facts.index.before(assignment, step):
                    continue
                if not isinstance(value, cst.Call) or facts.grad_mode.disabled_by(value) is None:
                    continue
                if facts.values.holds(value) & Holds.ACTIVATION and self._calls_model(value):
                    yield assignment, value

    def _calls_model(self, call: cst.Call) -> bool:
        """A forward pass: the call of a model (`model(x)`, `self.net(x)`,
        `model.forward(x)`), not torch math over an activation."""
        func = call.func
        if isinstance(func, cst.Attribute) and func.attr.value == "forward":
            func = func.value
        return self.facts.names.qualified(func) is None and bool(self.facts.values.holds(func) & Holds.MODEL)

    def _backpropagated_term(self, assignment: cst.Assign, step: cst.Call) -> Optional[tuple]:
        facts = self.facts
        terms = facts.shared("loss_terms", LossTerms)
        target = assignment.targets[0].target if len(assignment.targets) == 1 else None
        if not isinstance(target, cst.Name):
            return None
        for read in terms.reads_of(target.value, assignment):
            if facts.grad_mode.is_disabled(read):
                continue  # computed in the block itself: DL302's case
            term = terms.term(read)
            if not terms.is_loss_shaped(term, read):
                continue
            backward = terms.backward_through_sum(term)
            if backward is None or facts.grad_mode.is_disabled(backward) or not facts.index.before(backward, step):
                continue
            return term, backward
        return None


def _mode_text(source: cst.CSTNode, facts) -> str:
    code = facts.module.code_for_node
    if isinstance(source, cst.With):
        return ", ".join(code(item.item) for item in source.items)
    if isinstance(source, cst.FunctionDef):
        setter = facts.grad_mode.function_setter(source)
        if setter is not None:
            return _setter_text(setter, facts)
        return f"every caller of {source.name.value}() disables grad"
    return code(source).strip()


def _setter_text(setter, facts) -> str:
    """`@torch.no_grad()`, or the rebinding line `step = torch.no_grad()(step)`."""
    manager, written = setter
    if isinstance(written, cst.Decorator):
        return "@" + facts.module.code_for_node(manager)
    return facts.module.code_for_node(written).strip()
