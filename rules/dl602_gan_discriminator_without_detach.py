from __future__ import annotations

from typing import Optional

import libcst as cst

from detachlint.analysis import Holds
from detachlint.analysis.loops import LoopFacts
from detachlint.analysis.names import dotted
from detachlint.analysis.priors import DISCRIMINATOR_NAME, DISCRIMINATOR_OPTIMIZER_NAME, GENERATOR_NAME
from detachlint.analysis.values import detached_read
from detachlint.analysis.vocabulary import DETACHING_METHODS, NO_GRAPH_METHODS
from detachlint.rule import Invalid, Replace, Rule

def _callee(call: cst.Call) -> cst.BaseExpression:
    """`netD` for `netD(x)`, `self.netD` for `self.netD(x)` and `self.netD.forward(x)`."""
    func = call.func
    return func.value if isinstance(func, cst.Attribute) and func.attr.value == "forward" else func


def _last_name(expr: cst.BaseExpression) -> str:
    return (dotted(expr) or "").rsplit(".", 1)[-1]


def _handed_to_unseen_code(facts, read: cst.Name) -> bool:
    """`read` is an argument of a call whose result the interpreter cannot see into."""
    parent = facts.index.parent(read)
    call = facts.index.parent(parent) if isinstance(parent, cst.Arg) else None
    if not isinstance(call, cst.Call) or facts.interpreter.modules_held(call.func):
        return False  # a model, even one handed in: its output keeps the graph
    return facts.interpreter.made_by_unseen_code(call)


def _retains_graph(call: cst.Call) -> bool:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "retain_graph":
            return not (isinstance(arg.value, cst.Name) and arg.value.value == "False")
    return False


class GanDiscriminatorWithoutDetach(Rule):
    """A GAN's discriminator step fed the generator's output without `.detach()`.

    ## What it does
    Flags `netD(fake)` where `fake = netG(noise)`, when the discriminator's
    loss built from it is backpropagated and a later `backward()` (the
    generator step) goes through `fake` again, with no `retain_graph=True`.
    Also flags the discriminator step itself, whatever the generator is
    called (`recon = model(x)`, `fake, *_ = self.G(z)`): a backward through
    `D(fake)`, with `fake` the live output of another model that trains,
    followed by a step of the discriminator's optimizer only. Either the
    generator step reuses that discriminator output after the step edited
    the discriminator's weights in place, or the backward spends a pass
    through the generator on gradients nobody applies.

    ## Why is this bad?
    The discriminator's `backward()` runs on through `fake` into the
    generator: it computes generator gradients nobody wants, and it frees
    the generator's graph. The generator step then backpropagates through
    that freed graph and raises `RuntimeError: Trying to backward through
    the graph a second time`. With `retain_graph=True` added to silence it,
    the generator's gradients from the discriminator step leak into its
    update unless it is zeroed in between. A generator loss computed from the
    same `D(fake)` output before `optD.step()` raises "one of the variables
    needed for gradient computation has been modified by an inplace
    operation" (torch 1.5 and later). Where the generator is sampled anew for
    its own step, every discriminator step still runs a full backward pass
    through the generator for gradients that are thrown away.

    ## Example
    ```python
    import torch

    def train_step(netG, netD, criterion, optD, optG, real, noise, ones, zeros):
        fake = netG(noise)
        optD.zero_grad()
        loss_d = criterion(netD(real), ones) + criterion(netD(fake), zeros)
        loss_d.backward()
        optD.step()
        optG.zero_grad()
        loss_g = criterion(netD(fake), ones)
        loss_g.backward()
        optG.step()
    ```

    Use instead:
    ```python
    import torch

    def train_step(netG, netD, criterion, optD, optG, real, noise, ones, zeros):
        fake = netG(noise)
        optD.zero_grad()
        loss_d = criterion(netD(real), ones) + criterion(netD(fake.detach()), zeros)
        loss_d.backward()
        optD.step()
        optG.zero_grad()
        loss_g = criterion(netD(fake), ones)
        loss_g.backward()
        optG.step()
    ```

    ## Not flagged
    - `netD(fake.detach())`, or `fake` generated under `torch.no_grad()`.
    - A discriminator backward with `retain_graph=True` whose generator
      step calls the discriminator anew (a choice, if an expensive one).
    - The generator step: the backward is followed by the generator's own
      optimizer step (`loss_g.backward(); optG.step()`), or by steps of both
      optimizers (one loss trains both, on purpose).
    - `fake` from a model the file freezes or that no optimizer steps and
      whose name does not say generator.
    - Discriminators whose names do not say so (`netD`, `D`,
      `discriminator`, `critic`); for the discriminator step alone, also
      steps of optimizers whose names or parameters do not say
      discriminator (an RL critic's optimizer steps a value network whose
      inputs rightly come from the actor).

    ## Fix safety
    The fix passes `fake.detach()` to the discriminator. It is safe: the
    discriminator's gradients are the same, the generator's graph survives
    for its own step, and the code as written raises at that step.

    ## Verification
    The probe runs the GAN step and reads the parameters the generator
    output's graph reaches, before and after the discriminator's backward:
    confirmed when that backward puts gradients into them and, where the
    finding says so, the generator step's backward raises "Trying to
    backward through the graph a second time" or "modified by an inplace
    operation"; refuted when the output carries no graph, the backward leaves
    their `.grad` as it was, or the generator's backward runs through.

    ## References
    - The DCGAN example in pytorch/examples, which detaches `fake` for the
      discriminator step.
    """

    code = "DL602"
    name = "gan-discriminator-without-detach"
    fix_title = "Detach the generator's output for the discriminator step"
    message = "`{call}` backpropagates the discriminator loss into the generator through `{fake}`{consequence}"
    harm = "raises"
    default_enabled = True

    valid = [
        # The discriminator sees the fakes through a history pool of another module, which returns copies of their data.
        """
        import torch
        from torch import nn
        from util import ImagePool

        G, D = nn.Linear(8, 8), nn.Linear(8, 1)
        opt_g = torch.optim.Adam(G.parameters())
        opt_d = torch.optim.Adam(D.parameters())
        pool = ImagePool(50)
        mse = nn.MSELoss()
        for real, z in [(torch.randn(4, 8), torch.randn(4, 8))]:
            opt_g.zero_grad()
            fake = G(z)
            g_loss = mse(D(fake), torch.ones(4, 1))
            g_loss.backward()
            opt_g.step()
            opt_d.zero_grad()
            fake = pool.query(fake)
            d_loss = mse(D(real), torch.ones(4, 1)) + mse(D(fake), torch.zeros(4, 1))
            d_loss.backward()
            opt_d.step()
        """,
        # Detached for the discriminator.
        """
        import torch

        def train_step(netG, netD, criterion, optD, optG, real, noise, ones, zeros):
            fake = netG(noise)
            loss_d = criterion(netD(real), ones) + criterion(netD(fake.detach()), zeros)
            loss_d.backward()
            optD.step()
            loss_g = criterion(netD(fake), ones)
            loss_g.backward()
            optG.step()
        """,
        # Generated under no_grad for the discriminator step.
        """
        import torch

        def d_step(G, D, z, real, opt_d):
            with torch.no_grad():
                fake = G(z)
            loss = D(fake).mean() - D(real).mean()
            loss.backward()
            opt_d.step()
        """,
        # retain_graph=True: deliberate.
        """
        import torch

        def train_step(netG, netD, criterion, optD, optG, noise, ones, zeros):
            fake = netG(noise)
            loss_d = criterion(netD(fake), zeros)
            loss_d.backward(retain_graph=True)
            optD.step()
            optG.zero_grad()
            loss_g = criterion(netD(fake), ones)
            loss_g.backward()
            optG.step()
        """,
        # No generator step through fake afterwards.
        """
        import torch

        def d_only(netG, netD, noise, opt):
            fake = netG(noise)
            loss = netD(fake).mean()
            loss.backward()
            opt.step()
        """,
        # One loss trains both nets: both optimizers step on this backward.
        """
        import torch

        def joint_step(G, D, z, real, opt_d, opt_g):
            fake = G(z)
            loss = D(real).mean() - D(fake).mean()
            loss.backward()
            opt_d.step()
            opt_g.step()
        """,
        # The generator is frozen for this phase.
        """
        import torch

        def d_phase(netG, netD, z, real, optimizerD):
            netG.requires_grad_(False)
            fake = netG(z)
            loss = netD(fake).mean() - netD(real).mean()
            loss.backward()
            optimizerD.step()
        """,
    ]

    invalid = [
        # The generator, sampled anew for its own step: the discriminator
        # step's backward still runs through it for nothing.
        Invalid(
            """
            import torch
            from torch import nn

            class Trainer:
                def __init__(self, generator: nn.Module, discriminator: nn.Module):
                    self.G, self.D = generator, discriminator
                    self.g_optimizer = torch.optim.Adam(self.G.parameters(), 1e-4)
                    self.d_optimizer = torch.optim.Adam(self.D.parameters(), 4e-4)

                def train_step(self, real_images, z):
                    d_loss = torch.relu(1.0 - self.D(real_images)).mean()
                    fake_images, _ = self.G(z)
                    d_loss = d_loss + torch.relu(1.0 + self.D(fake_images)).mean()
                    self.d_optimizer.zero_grad()
                    d_loss.backward()
                    self.d_optimizer.step()
                    fake_images, _ = self.G(z)
                    g_loss = -self.D(fake_images).mean()
                    self.g_optimizer.zero_grad()
                    g_loss.backward()
                    self.g_optimizer.step()
            """,
            line=13,
            message="runs a second backward pass through the generator for gradients the discriminator step `self.d_optimizer.step()` does not use",
        ),
        # One discriminator output shared by both losses, across the D step.
        Invalid(
            """
            import torch

            def train(G, D, opt_D, opt_G, real, steps, n_ideas=5):
                for step in range(steps):
                    G_paintings = G(torch.randn(64, n_ideas))
                    prob_real = D(real)
                    prob_fake = D(G_paintings)
                    D_loss = -torch.mean(torch.log(prob_real) + torch.log(1.0 - prob_fake))
                    G_loss = torch.mean(torch.log(1.0 - prob_fake))
                    opt_D.zero_grad()
                    D_loss.backward(retain_graph=True)
                    opt_D.step()
                    opt_G.zero_grad()
                    G_loss.backward()
                    opt_G.step()
            """,
            line=7,
            message="modified by an inplace operation",
        ),
        Invalid(
            """
            import torch

            def train_step(netG, netD, criterion, optD, optG, real, noise, ones, zeros):
                fake = netG(noise)
                optD.zero_grad()
                loss_d = criterion(netD(real), ones) + criterion(netD(fake), zeros)
                loss_d.backward()
                optD.step()
                optG.zero_grad()
                loss_g = criterion(netD(fake), ones)
                loss_g.backward()
                optG.step()
            """,
            line=6,
            column=54,
            message="the generator step's `loss_g.backward()` (line 11)",
            fixed="""
            import torch

            def train_step(netG, netD, criterion, optD, optG, real, noise, ones, zeros):
                fake = netG(noise)
                optD.zero_grad()
                loss_d = criterion(netD(real), ones) + criterion(netD(fake.detach()), zeros)
                loss_d.backward()
                optD.step()
                optG.zero_grad()
                loss_g = criterion(netD(fake), ones)
                loss_g.backward()
                optG.step()
            """,
        ),
        Invalid(
            """
            import torch

            def train(generator, discriminator, loader, opt_g, opt_d, latent_dim=100):
                adversarial_loss = torch.nn.BCELoss()
                for imgs, _ in loader:
                    z = torch.randn(imgs.shape[0], latent_dim)
                    gen_imgs = generator(z)
                    valid = torch.ones(imgs.shape[0], 1)
                    fake = torch.zeros(imgs.shape[0], 1)
                    opt_d.zero_grad()
                    real_loss = adversarial_loss(discriminator(imgs), valid)
                    fake_loss = adversarial_loss(discriminator(gen_imgs), fake)
                    d_loss = (real_loss + fake_loss) / 2
                    d_loss.backward()
                    opt_d.step()
                    opt_g.zero_grad()
                    g_loss = adversarial_loss(discriminator(gen_imgs), valid)
                    g_loss.backward()
                    opt_g.step()
            """,
            line=12,
        ),
        Invalid(
            """
            import torch

            class WGAN:
                def step(self, z, real):
                    fake = self.G(z)
                    d_loss = self.D(fake).mean() - self.D(real).mean()
                    d_loss.backward()
                    self.opt_d.step()
                    g_loss = -self.D(fake).mean()
                    g_loss.backward()
                    self.opt_g.step()
            """,
            line=6,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        facts = self.facts
        discriminator = _callee(node)
        if not self._is_model(discriminator) and not DISCRIMINATOR_NAME.fullmatch(_last_name(discriminator)):
            return
        fake = next((arg.value for arg in node.args if arg.keyword is None), None)
        if fake is None:
            return
        binding = None
        if isinstance(fake, cst.Name):
            binding = facts.values.scope(node).assignment_before(fake.value, node)
            if binding is None or binding[2] is None or facts.grad_mode.is_disabled(binding[1]):
                return
            made_by = self._producer(binding[2])
        elif facts.grad_mode.is_disabled(node):
            return
        else:
            made_by = self._producer(fake)  # `D(G(z))`
        if made_by is None or dotted(_callee(made_by)) == dotted(discriminator):
            return
        values = facts.values
        first = next(iter(values.backwards_from(node)), None)
        if first is None:
            return
        consequence, fix, harm = None, None, None
        shown = facts.module.code_for_node(fake)
        detached = cst.Call(cst.Attribute(fake, cst.Name("detach")))
        if binding is not None and self._trains(made_by) and not _retains_graph(first):
            later = self._later_backward_through(fake, binding, first)
            if later is not None:
                consequence = (
                    f" and frees its graph: the generator step's `{facts.module.code_for_node(later)}`"
                    f" (line {facts.line_of(later)}) then raises \"Trying to backward through the graph a second time\";"
                    f" pass `{shown}.detach()`"
                )
                fix = Replace(fake, detached)
        if consequence is None and self._feeds_trained_generator(node, made_by):
            d_step = self._discriminator_step_after(first, node, made_by)
            if d_step is not None:
                consequence, shared = self._after_d_step(node, first, d_step, shown)
                if not shared and _retains_graph(first):
                    return  # the graph kept for the generator step on purpose: a choice, if an expensive one
                # Unsafe: the generator no longer receives the discriminator
                # loss's gradients, which is the point, but changes its update
                # where nothing zeroed them before its own step.
                fix = None if shared else Replace(fake, detached, unsafe=True)
                harm = None if shared else "waste"  # only a pass the step does not use
        if consequence is None:
            return
        self.report(
            node,
            fix=fix,
            harm=harm,
            call=facts.module.code_for_node(node),
            fake=shown,
            consequence=consequence,
        )

    def _is_model(self, expr: cst.BaseExpression) -> bool:
        """A module by what the code does with it: built as one, or stepped by an optimizer."""
        facts = self.facts
        if facts.names.qualified(expr) is not None:
            return False  # `torch.tanh`, `F.relu`: a function of a library
        return bool(facts.values.holds(expr) & Holds.MODEL) or dotted(expr) in facts.optimizers.stepped_modules()

    def _producer(self, expr: cst.BaseExpression, depth: int = 0) -> Optional[cst.Call]:
        """The model call whose live output `expr` is: `G(z)`, `G(z) * 0.5 + 0.5`,
        `G(z).view(n, -1)`, `torch.tanh(G(z))`; None through a cut (`.detach()`, `.data`)."""
        if depth > 8:
            return None
        if isinstance(expr, cst.Call):
            func = expr.func
            if self._may_generate(_callee(expr)):
                return expr
            if isinstance(func, cst.Attribute) and self.facts.names.qualified(func) is None:
                if func.attr.value in DETACHING_METHODS | NO_GRAPH_METHODS:
                    return None
                return self._producer(func.value, depth + 1)  # a tensor method: the graph goes on
            if (self.facts.names.qualified(func) or "").startswith("torch."):
                return next((p for a in expr.args if (p := self._producer(a.value, depth + 1)) is not None), None)
            return None
        if isinstance(expr, cst.BinaryOperation):
            return self._producer(expr.left, depth + 1) or self._producer(expr.right, depth + 1)
        if isinstance(expr, cst.UnaryOperation):
            return self._producer(expr.expression, depth + 1)
        return None

    def _may_generate(self, callee: cst.BaseExpression) -> bool:
        """A model by what the code does with it, or a callable the file does
        not define or import (a parameter, an attribute) named like a generator."""
        if self._is_model(callee):
            return True
        unknown = self.facts.names.qualified(callee) is None and not self.facts.intent.helpers_called(cst.Call(callee))
        return unknown and bool(GENERATOR_NAME.fullmatch(_last_name(callee)))

    def _trains(self, made_by: cst.Call) -> bool:
        """The producer is a model an optimizer of the file steps, or (where
        what its optimizer owns is not seen) one named like a generator."""
        name = dotted(_callee(made_by))
        if name is None:
            return False
        return name in self.facts.optimizers.stepped_modules() or bool(GENERATOR_NAME.fullmatch(name.rsplit(".", 1)[-1]))

    def _later_backward_through(self, fake: cst.Name, binding, first: cst.Call) -> Optional[cst.Call]:
        """The generator step: a later backward through the same `fake`, read
        anew (not a new sample, not through `.detach()`)."""
        facts = self.facts
        scope, values = facts.values.scope(fake), facts.values
        for read in scope.reads.get(fake.value, []):
            if not facts.index.before(first, read) or detached_read(read, facts.index):
                continue
            if scope.assignment_before(fake.value, read) != binding:
                continue
            if _handed_to_unseen_code(facts, read):
                continue  # `pool.query(fake)` of another file: what comes back is not known to hold the graph
            later = next((call for call in values.backwards_from(read) if facts.index.before(first, call)), None)
            if later is not None:
                return later
        return None

    def _feeds_trained_generator(self, d_call: cst.Call, made_by: cst.Call) -> bool:
        """`fake` comes from another model that trains and is not frozen: a
        model some optimizer of the file steps (or, where the file says
        nothing of what its optimizers step, one named like a generator)."""
        facts = self.facts
        producer = _callee(made_by)
        name = dotted(producer)
        if name is None or name == dotted(_callee(d_call)) or not self._may_generate(producer):
            return False
        if name.rsplit(".", 1)[-1] in facts.modules.frozen_names:
            return False
        return self._trains(made_by)

    def _discriminator_step_after(self, backward: cst.Call, d_call: cst.Call, made_by: cst.Call) -> Optional[cst.Call]:
        """The optimizer step that follows `backward`, when it steps the
        discriminator and not the generator, and no step of another model
        comes before the next backward."""
        facts, loops = self.facts, self.facts.shared("loops", LoopFacts)
        index = facts.index
        scope = index.scope_of(backward)
        d_name = dotted(_callee(d_call))
        g_name = dotted(_callee(made_by))
        found = None
        for call in index.descendants(scope, cst.Call):
            if not index.before(backward, call) or index.scope_of(call) is not scope:
                continue
            if loops.is_gradient_call(call):
                break  # the next backward: the step after this one is another step's
            if not loops.is_optimizer_step(call):
                continue
            optimizer = call.func.value if not call.args else call.args[0].value
            text = dotted(optimizer) or ""
            owned = facts.optimizers.stepped_by(text, call)
            if owned:
                steps_d = d_name in owned and g_name not in owned
            else:
                steps_d = bool(DISCRIMINATOR_OPTIMIZER_NAME.fullmatch(text.rsplit(".", 1)[-1]))
            if not steps_d:
                return None  # the generator (or everything) steps on this backward too
            found = found or call
        return found

    def _after_d_step(self, d_call: cst.Call, first: cst.Call, d_step: cst.Call, fake: str):
        """What follows the discriminator step, and whether the generator
        loss shares this discriminator output: a generator backward through
        it, whose saved weights that step edited in place, or else only the
        wasted pass through the generator."""
        facts = self.facts
        code = facts.module.code_for_node
        for later in facts.values.backwards_from(d_call):
            if facts.index.before(d_step, later):
                return (
                    f": `{code(d_step)}` (line {facts.line_of(d_step)}) then updates in place the discriminator"
                    f" weights that `{code(later)}` (line {facts.line_of(later)}) still needs, and it raises"
                    f" \"one of the variables needed for gradient computation has been modified by an inplace operation\";"
                    f" feed the discriminator step `{fake}.detach()` and compute the generator loss from a new"
                    f" discriminator call after the step"
                ), True
        return (
            f": `{code(first)}` (line {facts.line_of(first)}) runs a second backward pass through the generator"
            f" for gradients the discriminator step `{code(d_step)}` does not use; pass `{fake}.detach()`"
        ), False
