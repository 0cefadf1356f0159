from __future__ import annotations

import libcst as cst

from detachlint.analysis.loss_terms import LossTerms
from detachlint.analysis.names import dotted
from detachlint.analysis.values import Holds
from detachlint.rule import Invalid, Replace, Rule, brief


class LossOnDetachedOutput(Rule):
    """A loss computed from a detached prediction, then backpropagated.

    ## What it does
    Flags `out.detach()` (or `out.data`) of a model output when the
    detached value feeds a loss term made only of it and plain data
    (`criterion(out.detach(), y)`, `((pred.detach() - y) ** 2).mean()`,
    `memory.memory_loss(feats.detach(), y)` for a loss helper of a class
    without parameters), and that term is added into a loss that reaches
    `backward()` in the same function. Also flags a loss detached as a
    whole and then summed into the loss
    (`criterionAT(fs, ft).detach() * opt.beta`). Weights of a term may be
    numbers, hyperparameters or configuration lookups (`args.beta`,
    `cfg["w"]`, `Config.W`). And a generator step that judges a detached
    fake: `D(fake.detach())` with `fake = G(z)`, in a step whose optimizers
    update `G` and not `D` (the steps after the backward, or the optimizer
    Lightning runs for the `optimizer_idx` branch that returns the loss).

    ## Why is this bad?
    A detached prediction is a constant to autograd. The loss term built
    from it and the targets has no path back to the model: its backward
    sends the model no gradient, so the term the training is meant to
    minimize does nothing. If it is the whole loss, `backward()` raises
    "element 0 of tensors does not require grad"; if other terms carry a
    graph, training runs, silently optimizing only those. The `.detach()`
    often comes from logging code (`pred = out.detach().cpu()`) that the
    loss was later written against.

    ## Example
    ```python
    import torch

    def train_step(model, x, y, criterion, optimizer, reg):
        out = model(x)
        pred = out.detach()
        loss = criterion(pred, y) + reg * sum(p.abs().sum() for p in model.parameters())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return pred
    ```

    Use instead:
    ```python
    import torch

    def train_step(model, x, y, criterion, optimizer, reg):
        out = model(x)
        loss = criterion(out, y) + reg * sum(p.abs().sum() for p in model.parameters())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return out.detach()
    ```

    ## Not flagged
    - A detached *target* compared with a live prediction
      (`criterion(pred, target.detach())`, `(q - target.detach()) ** 2`).
    - A detached value used as a weight, mask or advantage in a term that
      also holds a live tensor (`-(log_prob * advantage.detach()).mean()`,
      `(weights.detach() * losses).sum()`): a deliberate stop-gradient.
    - A detached loss that is only logged or returned, never backpropagated
      in the same function.
    - A term compared with a value the analysis cannot see through (the
      result of an unknown function, `self.<attribute>`): it may carry a
      graph.
    - A loss method of an `nn.Module` with parameters of its own
      (`quantizer.codebook_loss(z.detach())`): the module's parameters
      learn from it.
    - A loss offset or divided by its own detached value
      (`target + (loss - loss.detach())`, `ce / ce.detach()`), or a
      straight-through sum (`hard.detach() + soft - soft.detach()`): a
      value swapped or normalised on purpose, the gradient is kept.
    - `D(fake.detach())` in the discriminator's step (its optimizer steps
      `D`): the usual way to keep the generator out of that step.
    - A loss that is entirely graphless where backward is called: DL203
      reports that one.
    - Code under `torch.no_grad()` (DL302, DL303) and test code.

    ## Fix safety
    When `.detach()` (or `.data`) is written inside the loss term, the fix
    removes it. It is unsafe: it makes the model receive this term's
    gradient, which is the point, but changes what training optimizes. No
    fix when the detached value was stored in a name first, since other
    uses of that name may rely on it being detached.

    ## Verification
    The probe runs the function with synthesized inputs and looks at the
    value assigned on the finding's line: confirmed when it has
    `requires_grad=False` and no `grad_fn`, and the backward after it
    raises "does not require grad" or runs on the loss's other terms only;
    refuted when the value requires grad at run time. A generator step that
    judges a detached fake: the judge's output, read where the code computes
    it, is confirmed when its graph reaches none of the generator's
    trainable parameters, refuted when it reaches some.

    ## References
    - PyTorch docs, `torch.Tensor.detach`: "the result will never require
      gradient".
    """

    code = "DL202"
    name = "loss-on-detached-output"
    fix_title = "Compute the loss on the prediction, not its detached copy"
    message = "`{term}` {problem}"
    _DETACHED = "is a loss on a detached prediction ({detached}): backpropagating it (line {line}) sends the model no gradient through this term"
    _ADVERSARIAL = "judges `{fake}`, cut from `{generator}`, in a step that updates `{generator}` ({how}) but not `{judge}`: the adversarial term built from it sends `{generator}` no gradient"
    harm = "wrong-gradients"
    default_enabled = True

    valid = [
        # A straight-through estimator: the detached difference is added on purpose.
        """
        import torch
        from torch import nn

        def quantize(z):
            return z + (torch.round(z) - z).detach()

        enc = nn.Linear(4, 3)
        opt = torch.optim.SGD(enc.parameters(), lr=0.1)
        for x in [torch.randn(8, 4)]:
            loss = quantize(enc(x)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """,
        # The discriminator's step: the fake is detached on purpose.
        """
        import torch
        from torch import nn

        def discriminator_step(netG, netD, real, z, optimizerD):
            criterion = nn.BCEWithLogitsLoss()
            fake = netG(z)
            out_real, out_fake = netD(real), netD(fake.detach())
            errD = criterion(out_real, torch.ones_like(out_real)) + criterion(out_fake, torch.zeros_like(out_fake))
            optimizerD.zero_grad()
            errD.backward()
            optimizerD.step()

        def main(netG, netD, loader):
            optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-4)
            for real, z in loader:
                discriminator_step(netG, netD, real, z, optimizerD)
        """,
        # A detached target, a live prediction.
        """
        import torch.nn.functional as F

        def distill_step(student, teacher, x, optimizer):
            target = teacher(x).detach()
            loss = F.mse_loss(student(x), target)
            loss.backward()
            optimizer.step()
        """,
        # A semi-gradient TD error: the target side is detached.
        """
        import torch

        def td_step(q_net, s, a, r, s2, optimizer, gamma=0.99):
            q = q_net(s).gather(1, a)
            target = r + gamma * q_net(s2).max(1, keepdim=True).values
            loss = ((q - target.detach()) ** 2).mean()
            loss.backward()
            optimizer.step()
        """,
        # An advantage weights a live log-probability.
        """
        import torch

        def actor_critic_step(actor, critic, s, returns, dist_fn, a, optimizer):
            value = critic(s)
            dist = dist_fn(actor(s))
            advantage = returns - value
            policy_loss = -(dist.log_prob(a) * advantage.detach()).mean()
            value_loss = (returns - value).pow(2).mean()
            (policy_loss + 0.5 * value_loss).backward()
            optimizer.step()
        """,
        # Detached only for the logged metric.
        """
        import torch

        def train_step(model, x, y, criterion, optimizer, history):
            out = model(x)
            loss = criterion(out, y)
            loss.backward()
            optimizer.step()
            history.append(criterion(out.detach(), y).item())
        """,
        # Per-sample weights from the detached loss: a deliberate stop-gradient.
        """
        import torch
        import torch.nn.functional as F

        def focal_step(model, x, y, optimizer):
            out = model(x)
            weights = F.softmax(F.cross_entropy(out.detach(), y, reduction="none"), 0)
            loss = (weights * F.cross_entropy(out, y, reduction="none")).sum()
            loss.backward()
            optimizer.step()
        """,
        # Compared with the output of an unknown function: it may be live.
        """
        import torch

        def consistency_step(model, x, augment, optimizer):
            anchor = model(x).detach()
            loss = ((anchor - encode(model, augment(x))) ** 2).mean()
            loss.backward()
            optimizer.step()
        """,
        # Entirely graphless: DL203's finding, not this one.
        """
        import torch

        def step(model, x, optimizer):
            pred = model(x).detach()
            loss = ((pred - torch.zeros(3)) ** 2).mean()
            loss.backward()
        """,
        # A loss offset by its own detached value: the value changes, the gradient is kept.
        """
        import torch
        import torch.nn.functional as F

        def step(model, x, y, optimizer, target_value):
            out = model(x)
            loss = F.mse_loss(out, y)
            shifted = target_value + (loss - loss.detach())
            shifted.backward()
            optimizer.step()
        """,
        # Straight-through: the hard loss's value under the soft loss's gradient.
        """
        import torch.nn.functional as F

        def step(model, x, y, criterion, optimizer, tau=0.5):
            logits = model(x)
            hard = criterion(logits, y)
            soft = criterion(logits / tau, y)
            loss = hard.detach() + soft - soft.detach()
            loss.backward()
            optimizer.step()
        """,
        # A loss divided by its detached value: a gradient normalisation.
        """
        import torch.nn.functional as F

        def step(model, x, y, criterion, optimizer):
            out = model(x)
            ce = criterion(out, y)
            loss = ce / ce.detach()
            loss.backward()
            optimizer.step()
        """,
        # A loss method of a module with parameters of its own: the codebook learns.
        """
        import torch
        from torch import nn
        import torch.nn.functional as F

        class Quantizer(nn.Module):
            def __init__(self, n, d):
                super().__init__()
                self.codebook = nn.Embedding(n, d)

            def codebook_loss(self, z):
                idx = torch.cdist(z, self.codebook.weight).argmin(-1)
                return F.mse_loss(self.codebook(idx), z)

        def step(encoder, decoder, quantizer, x, optimizer):
            z = encoder(x)
            loss = F.mse_loss(decoder(z), x) + quantizer.codebook_loss(z.detach())
            loss.backward()
            optimizer.step()
        """,
        # Under no_grad: DL302 and DL303 report those.
        """
        import torch

        def train_step(model, x, y, criterion, optimizer):
            with torch.no_grad():
                loss = criterion(model(x).detach(), y)
            loss.backward()
            optimizer.step()
        """,
    ]

    invalid = [
        # An auxiliary loss turned into a number by a helper, then added to the loss.
        Invalid(
            """
            import torch
            from torch import nn
            import torch.nn.functional as F

            def aux_term(head, feats):
                return head(feats).pow(2).mean().item()

            def step(body, head, opt, x, y):
                feats = body(x)
                loss = F.mse_loss(feats.sum(1, keepdim=True), y) + 0.1 * aux_term(head, feats)
                opt.zero_grad()
                loss.backward()
                opt.step()

            body, head = nn.Linear(4, 3), nn.Linear(3, 2)
            step(body, head, torch.optim.SGD(list(body.parameters()) + list(head.parameters()), lr=0.1), torch.randn(8, 4), torch.randn(8, 1))
            """,
            line=6,
            message="contributes nothing to any gradient",
        ),
        # The generator's step judges a detached fake: no adversarial gradient reaches it.
        Invalid(
            """
            import torch
            from torch import nn

            def generator_step(netG, netD, z, optimizerG):
                criterion = nn.BCEWithLogitsLoss()
                fake = netG(z)
                output = netD(fake.detach())
                errG = criterion(output, torch.ones_like(output))
                optimizerG.zero_grad()
                errG.backward()
                optimizerG.step()

            def main(netG, netD, loader):
                optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-4)
                for z in loader:
                    generator_step(netG, netD, z, optimizerG)
            """,
            line=7,
            message="judges `fake.detach()`, cut from `netG`, in a step that updates `netG` (`optimizerG.step()`) but not `netD`",
        ),
        Invalid(
            """
            import torch

            def train_step(model, x, y, criterion, optimizer):
                out = model(x)
                loss = criterion(out.detach(), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """,
            line=5,
            column=22,
            message="`criterion(out.detach(), y)` is a loss on a detached prediction (`out.detach()`)",
            fixed="""
            import torch

            def train_step(model, x, y, criterion, optimizer):
                out = model(x)
                loss = criterion(out, y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            """,
        ),
        Invalid(
            """
            import torch
            from torch import nn

            def fit(model: nn.Module, loader, optimizer, reg=1e-4):
                for x, y in loader:
                    pred = model(x).detach().cpu()
                    mse = ((pred - y) ** 2).mean()
                    loss = mse + reg * model.weight.norm()
                    loss.backward()
                    optimizer.step()
            """,
            line=6,
            message="(`pred = model(x).detach().cpu()`): backpropagating it (line 9)",
        ),
        Invalid(
            """
            import torch.nn.functional as F

            def step(self, batch, optimizer):
                x, labels = batch
                logits = self.model(x)
                loss = F.cross_entropy(logits.data, labels) + self.aux_weight * self.aux_loss(logits)
                self.scaler.scale(loss).backward()
                self.scaler.step(optimizer)
            """,
            line=6,
        ),
        Invalid(
            """
            import torch

            def train(model, dataloader, optimizer, loss_fn):
                for images, targets in dataloader:
                    outputs = model(images)
                    loss = 0.5 * loss_fn(outputs.detach(), targets)
                    loss += 0.01 * outputs.pow(2).mean()
                    loss.backward()
                    optimizer.step()
            """,
            line=6,
        ),
        # A distillation term detached as a whole, then weighted and summed.
        Invalid(
            """
            import torch
            from torch import nn

            def train_step(student, teacher, loader, optimizer, criterions, opt):
                criterionCls = criterions["cls"]
                criterionAT = criterions["at"]
                for img, target in loader:
                    feat_s, output_s = student(img)
                    feat_t, _ = teacher(img)
                    at_loss = criterionAT(feat_s, feat_t).detach() * opt.beta
                    loss = criterionCls(output_s, target) + at_loss
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            line=10,
            message="(the loss itself is detached): backpropagating it (line 13)",
        ),
        # An adversarial term on the discriminator's detached verdict, a
        # target built with a dtype, a weight read from a config class.
        Invalid(
            """
            import torch
            from torch import nn

            class Config:
                ADV_WEIGHT = 0.1

            def generator_step(netg, netd, x, gt, optimizer_g):
                l1 = nn.L1Loss()
                bce = nn.BCELoss()
                fake = netg(x)
                pred_fake = netd(fake).detach()
                adv = bce(pred_fake, torch.ones(pred_fake.shape[0], dtype=torch.float32))
                loss = l1(fake, gt) + Config.ADV_WEIGHT * adv
                optimizer_g.zero_grad()
                loss.backward()
                optimizer_g.step()
            """,
            line=11,
        ),
        # A loss helper of a plain (parameterless) class, weighted by a config entry.
        Invalid(
            """
            import torch
            import torch.nn.functional as F

            class Prototypes:
                def __init__(self, n, d):
                    self.bank = torch.zeros(n, d)

                def memory_loss(self, feats, labels):
                    return (F.normalize(feats, dim=1) * self.bank[labels]).sum(1).mean()

            def train(model, loader, memory, optimizer, args):
                for x, y in loader:
                    logits, feats = model(x)
                    mem = 1.0 - memory.memory_loss(feats.detach(), y)
                    loss = F.cross_entropy(logits, y) + args["memory_lambda"] * mem
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            line=14,
        ),
    ]

    def finish(self) -> None:
        """The interpreter's view, whatever the terms are called and wherever
        the loss is backpropagated: a term cut from a graph that required grad,
        added to a loss that keeps one."""
        facts = self.facts
        reported = {facts.line_of(r.node) for r in self.reports}
        for cut, backward in facts.interpreter.cut_terms_backpropagated():
            if facts.line_of(cut) in reported or facts.intent.is_test_code(cut) or facts.grad_mode.is_disabled(backward):
                continue
            reported.add(facts.line_of(cut))
            text = facts.module.code_for_node(cut)
            text = brief(text)
            self.report(
                cut,
                term=text,
                problem=f"cuts the graph of a term the loss `{facts.module.code_for_node(backward).strip()}` (line {facts.line_of(backward)}) adds: that term contributes nothing to any gradient",
            )

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Attribute) and node.func.attr.value == "detach" and not node.args:
            self._check(node)
            self._check_adversarial(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value == "data":
            self._check(node)

    def _check(self, node: cst.CSTNode) -> None:
        facts = self.facts
        terms = facts.shared("loss_terms", LossTerms)
        prediction = terms.detached_prediction(node)
        if prediction is None or facts.grad_mode.is_disabled(node) or facts.intent.is_test_code(node):
            return
        for use in terms.uses(node):
            term = terms.term(use)
            if not (terms.is_loss_shaped(term, use) or terms.is_detached_loss(node, prediction)):
                continue
            backward = terms.backward_through_sum(term)
            if backward is None or facts.grad_mode.is_disabled(term) or facts.grad_mode.is_disabled(backward):
                continue
            target = facts.values.backward_target(backward)
            if target is not None and facts.values.computed_without_graph(target):
                return  # DL203 reports the backward itself
            inline = use is node
            # Inline, the term names it; through a name, show the assignment.
            shown = node if inline else facts.index.parent(terms.climb_conversions(node))
            detached = f"`{facts.module.code_for_node(shown)}`"
            if term is node:
                detached = "the loss itself is detached"  # `criterion(out, y).detach() * beta`
            self.report(
                node,
                fix=Replace(node, prediction, unsafe=True) if inline else None,
                term=facts.module.code_for_node(term),
                problem=self._DETACHED.format(detached=detached, line=facts.line_of(backward)),
            )
            return

    def _check_adversarial(self, node: cst.Call) -> None:
        """`self.d(fake.detach(), f)` with `fake = self.g(z)`, in a step whose
        optimizers update `self.g` and not `self.d`: a generator step that
        judges a detached fake (also Lightning's `training_step` branch for
        the generator's `optimizer_idx`)."""
        facts = self.facts
        receiver = node.func.value  # type: ignore[attr-defined]
        arg = facts.index.parent(node)
        judge = facts.index.parent(arg) if isinstance(arg, cst.Arg) else None
        if not isinstance(receiver, cst.Name) or not isinstance(judge, cst.Call) or node is judge.func:
            return
        entry = facts.values.scope(receiver).assignment_before(receiver.value, receiver)
        made = entry[2] if entry is not None else None
        if not isinstance(made, cst.Call) or not facts.values.holds(made.func) & Holds.MODEL:
            return
        generator, critic = dotted(made.func), dotted(judge.func)
        if generator is None or critic is None or generator == critic or not facts.values.holds(judge.func) & Holds.MODEL:
            return
        if facts.grad_mode.is_disabled(node) or facts.intent.is_test_code(node):
            return
        stepped, how = self._stepped_with(judge)
        if stepped is None or generator not in stepped or critic in stepped:
            return
        self.report(
            node,
            term=facts.module.code_for_node(judge) if len(facts.module.code_for_node(judge)) <= 60 else f"{critic}(...)",
            problem=self._ADVERSARIAL.format(fake=facts.module.code_for_node(node), generator=generator, how=how, judge=critic),
        )

    def _stepped_with(self, judge: cst.Call):
        """The modules updated after the loss built from `judge` is
        backpropagated, and how that is known: the optimizer steps after the
        backward in the same function, or Lightning's optimizer for the
        `optimizer_idx` branch whose returned loss carries it."""
        facts = self.facts
        function = facts.index.enclosing(judge, cst.FunctionDef)
        if function is None:
            return None, ""
        scope = facts.values.scope(judge)
        flowing = scope.flows_from(judge)
        returns = [r for r in facts.index.descendants(function.body, cst.Return) if r.value is not None and facts.index.scope_of(r) is function]
        if any(scope.reads_flow(r.value, flowing) for r in returns):
            stepped = facts.optimizers.stepped_after_return(judge)
            if stepped is not None:
                return stepped, "its `optimizer_idx` branch"
        backwards = facts.values.backwards_from(judge)
        if not backwards:
            return None, ""
        steps = [(c, owned) for c, owned in facts.optimizers.steps_in(function) if facts.index.before(backwards[0], c)]
        if not steps:
            return None, ""
        found = frozenset().union(*(owned for _, owned in steps))
        return found, f"`{facts.module.code_for_node(steps[0][0])}`"
