from __future__ import annotations

import re
from typing import Optional

import libcst as cst

from detachlint.analysis.names import dotted
from detachlint.analysis.values import detached_read
from detachlint.rule import Invalid, Replace, Rule

_GENERATOR = re.compile(r"(?:\w+_)?(?:generator|gen)(?:_\w+)?|net_?G\w*|G(?:_\w+)?", re.I)
_DISCRIMINATOR = re.compile(r"(?:\w+_)?(?:discriminator|disc|critic)(?:_\w+)?|net_?D\w*|D(?:_\w+)?", re.I)


def _callee(call: cst.Call) -> str:
    """`netD` for `netD(x)`, `self.netD(x)` and `self.netD.forward(x)`."""
    func = call.func
    if isinstance(func, cst.Attribute) and func.attr.value == "forward":
        func = func.value
    name = dotted(func) or ""
    return name.rsplit(".", 1)[-1]


def _is_generator_call(expr: Optional[cst.BaseExpression]) -> bool:
    return isinstance(expr, cst.Call) and bool(_GENERATOR.fullmatch(_callee(expr)))


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

    ## Why is this bad?
    The discriminator's `backward()` runs on through `fake` into the
    generator: it computes generator gradients nobody wants, and it frees
    the generator's graph. The generator step then backpropagates through
    that freed graph and raises `RuntimeError: Trying to backward through
    the graph a second time`. With `retain_graph=True` added to silence it,
    the generator's gradients from the discriminator step leak into its
    update unless it is zeroed in between.

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
    - A discriminator backward with `retain_graph=True` (a choice, if an
      expensive one), or no later backward through `fake`.
    - Names that do not say generator and discriminator (`netG`, `G`,
      `generator`, `gen_*`; `netD`, `D`, `discriminator`, `critic`).

    ## Fix safety
    The fix passes `fake.detach()` to the discriminator. It is safe: the
    discriminator's gradients are the same, the generator's graph survives
    for its own step, and the code as written raises at that step.

    ## Verification
    No probe yet.

    ## References
    - The DCGAN example in pytorch/examples, which detaches `fake` for the
      discriminator step.
    """

    code = "DL602"
    name = "gan-discriminator-without-detach"
    fix_title = "Detach the generator's output for the discriminator step"
    message = "`{call}` backpropagates the discriminator loss into the generator through `{fake}` and frees its graph: the generator step's `{later}` (line {line}) then raises \"Trying to backward through the graph a second time\"; pass `{fake}.detach()`"
    severity = "error"
    default_enabled = True

    valid = [
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
    ]

    invalid = [
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
        if not _DISCRIMINATOR.fullmatch(_callee(node)):
            return
        fake = next((arg.value for arg in node.args if arg.keyword is None and isinstance(arg.value, cst.Name)), None)
        if fake is None:
            return
        facts = self.facts
        scope = facts.values.scope(node)
        binding = scope.assignment_before(fake.value, node)
        if binding is None or not _is_generator_call(binding[2]) or facts.grad_mode.is_disabled(binding[1]):
            return
        values = facts.values
        first = next(iter(values.backwards_from(node)), None)
        if first is None or _retains_graph(first):
            return
        # The generator step: a later backward through the same `fake`, read
        # anew (not a new sample, not through `.detach()`).
        for read in scope.reads.get(fake.value, []):
            if not facts.index.before(first, read) or detached_read(read, facts.index):
                continue
            if scope.assignment_before(fake.value, read) != binding:
                continue
            later = next((call for call in values.backwards_from(read) if facts.index.before(first, call)), None)
            if later is not None:
                detached = cst.Call(cst.Attribute(fake, cst.Name("detach")))
                self.report(
                    node,
                    fix=Replace(fake, detached),
                    call=facts.module.code_for_node(node),
                    fake=fake.value,
                    later=facts.module.code_for_node(later),
                    line=str(facts.line_of(later)),
                )
                return
