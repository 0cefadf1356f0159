"""A hazard is found wherever it is written: at module level, in a function
with untyped parameters, in a method; and the look-alikes stay clean there."""

from __future__ import annotations

import textwrap

from detachlint.engine import lint_source
from detachlint.registry import load_rules

RULES = load_rules()


def _lines(code: str, source: str):
    result = lint_source(textwrap.dedent(source).encode(), "case.py", [RULES[code]])
    assert not result.errors
    return sorted(f.line for f in result.findings if f.code == code)


SCRIPT = """\
import torch
import torch.nn.functional as F
from torch import nn

x, y = torch.randn(16, 4), torch.randn(16, 1)
encoder, head = nn.Linear(4, 8), nn.Linear(8, 1)
opt = torch.optim.Adam([*encoder.parameters(), *head.parameters()])
for step in range(3):
    feats = encoder(x).detach()
    loss = F.mse_loss(head(feats), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""


def test_a_freeze_in_a_plain_training_script():
    assert _lines("DL201", SCRIPT) == [9]
    assert _lines("DL201", SCRIPT.replace("encoder(x).detach()", "encoder(x)")) == []
    # Frozen on purpose: the optimizer does not own the encoder.
    frozen = SCRIPT.replace("[*encoder.parameters(), *head.parameters()]", "head.parameters()")
    assert _lines("DL201", frozen) == []


def test_a_freeze_in_a_function_with_untyped_parameters():
    source = """\
    import torch
    import torch.nn.functional as F


    def fit(encoder, head, opt, batches):
        for x, y in batches:
            with torch.no_grad():
                feats = encoder(x)
            loss = F.mse_loss(head(feats), y)
            opt.zero_grad()
            loss.backward()
            opt.step()


    if __name__ == "__main__":
        enc, hd = torch.nn.Linear(4, 8), torch.nn.Linear(8, 1)
        fit(enc, hd, torch.optim.SGD([*enc.parameters(), *hd.parameters()], lr=0.1), [(torch.randn(2, 4), torch.randn(2, 1))])
    """
    assert _lines("DL201", source) == [7]


def test_a_gradient_penalty_on_detached_interpolates_is_no_freeze():
    """WGAN-GP: the penalty is computed in a helper on `fake.data`
    interpolates and trains the critic the helper is handed."""
    source = """\
    import torch
    from torch import nn


    def penalty(critic, real, fake):
        alpha = torch.rand(real.size(0), 1)
        mixed = (alpha * real.data + (1 - alpha) * fake.data).requires_grad_(True)
        out = critic(mixed)
        grads = torch.autograd.grad(out.sum(), mixed, create_graph=True)[0]
        return ((grads.norm(2, dim=1) - 1) ** 2).mean()


    gen, critic = nn.Linear(3, 2), nn.Linear(2, 1)
    opt_c = torch.optim.Adam(critic.parameters())
    opt_g = torch.optim.Adam(gen.parameters())
    for real in [torch.randn(4, 2)] * 3:
        fake = gen(torch.randn(4, 3))
        c_loss = critic(fake.detach()).mean() - critic(real).mean() + 10 * penalty(critic, real, fake)
        opt_c.zero_grad()
        c_loss.backward()
        opt_c.step()
        g_loss = -critic(fake).mean()
        opt_g.zero_grad()
        g_loss.backward()
        opt_g.step()
    """
    assert _lines("DL201", source) == []


def test_an_optimizer_over_both_models_steps_what_the_second_backward_computes():
    """InfoGAN's information loss: one optimizer owns the generator and the
    discriminator, so the gradients the backward puts in the generator are used."""
    source = """\
    import itertools
    import torch
    from torch import nn

    generator, discriminator = nn.Linear(3, 2), nn.Linear(2, 1)
    optimizer_info = torch.optim.Adam(itertools.chain(generator.parameters(), discriminator.parameters()))
    for _ in range(3):
        code = torch.randn(4, 3)
        gen_imgs = generator(code)
        info_loss = ((discriminator(gen_imgs) - 1) ** 2).mean()
        optimizer_info.zero_grad()
        info_loss.backward()
        optimizer_info.step()
    """
    assert _lines("DL602", source) == []


def test_a_module_switched_to_eval_as_it_is_built():
    """`eval()` and `to()` return the module: `net = Net().eval().to(d)` is in eval mode."""
    source = """\
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            return self.fc(x)


    net = Net().eval().to("cpu")
    preds = []
    for xb in [torch.randn(4, 3)] * 5:
        preds.append(net(xb))
    """
    assert _lines("DL301", source) == [17]  # the model call in the loop
    twin = source.replace("for xb in", "with torch.no_grad():\\n  for xb in").replace("    preds.append(net(xb))", "      preds.append(net(xb))")
    assert _lines("DL301", twin) == []
    trained = source.replace("Net().eval().to", "Net().train().to")
    assert _lines("DL301", trained) == []


EVAL_SPELLINGS = """\
import torch
from torch import nn

net = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))
batches = [torch.randn(4, 3) for _ in range(5)]
net.eval()
preds = {loop}
"""


def test_an_evaluation_loop_written_as_a_comprehension_or_a_map():
    for loop in ("[net(xb) for xb in batches]", "list(map(net, batches))", "{i: net(xb) for i, xb in enumerate(batches)}"):
        assert _lines("DL301", EVAL_SPELLINGS.format(loop=loop)) == [7], loop
        under_no_grad = EVAL_SPELLINGS.format(loop=loop).replace("preds = ", "with torch.no_grad():\n    preds = ")
        assert _lines("DL301", under_no_grad) == [], loop


def test_a_comprehension_whose_outputs_are_backpropagated_trains():
    source = EVAL_SPELLINGS.format(loop="[net(xb) for xb in batches]").replace("net.eval()", "net.train()")
    source += "torch.stack(preds).sum().backward()\n"
    assert _lines("DL301", source) == []
    source = EVAL_SPELLINGS.format(loop="[net(xb) for xb in batches]") + "torch.stack(preds).sum().backward()\n"
    assert _lines("DL301", source) == []  # backpropagated after the loop: not an evaluation


def test_a_freeze_in_a_method_whose_optimizer_was_built_from_the_constructors_arguments():
    source = """\
    import torch


    class Learner:
        def __init__(self, trunk, head):
            self.trunk = trunk
            self.head = head
            self.updater = torch.optim.SGD(list(trunk.parameters()) + list(head.parameters()), lr=0.1)

        def step(self, xb, yb):
            self.updater.zero_grad()
            h = self.trunk(xb).detach()
            err = torch.nn.functional.mse_loss(self.head(h), yb)
            err.backward()
            self.updater.step()
    """
    assert _lines("DL201", source) == [12]
    # The trunk left out of the optimizer: frozen on purpose.
    assert _lines("DL201", source.replace("list(trunk.parameters()) + list(head.parameters())", "head.parameters()")) == []


def test_a_freeze_through_data_like_through_detach():
    assert _lines("DL201", SCRIPT.replace("encoder(x).detach()", "encoder(x).data")) == [9]
    inline = SCRIPT.replace("feats = encoder(x).detach()\n    loss = F.mse_loss(head(feats), y)", "loss = F.mse_loss(head(encoder(x).data), y)")
    assert _lines("DL201", inline) == [9]


ACCUMULATION = """\
import torch
from torch import nn

net = nn.Linear(3, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
stats = {{}}
for x, y in [(torch.randn(4, 3), torch.randn(4, 1))] * 3:
    loss = nn.functional.mse_loss(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    {kept}
"""


def test_losses_kept_per_key_with_their_graphs():
    for kept in ('stats["loss"] = stats.get("loss", 0) + loss', 'stats.setdefault("loss", []).append(loss)'):
        result = lint_source(ACCUMULATION.format(kept=kept).encode(), "case.py", [RULES["DL401"]])
        assert [(f.line, f.message.split("`")[1]) for f in result.findings] == [(12, kept)], kept
        fixed = kept.replace("+ loss", "+ loss.item()").replace("append(loss)", "append(loss.item())")
        assert _lines("DL401", ACCUMULATION.format(kept=fixed)) == [], fixed


def test_a_freeze_split_between_a_helper_and_its_caller():
    source = """\
    import itertools
    import torch
    from torch import nn


    def embed(g, xs):
        return g(xs).detach()


    def fit(g, top, upd, pairs):
        for xs, ys in pairs:
            upd.zero_grad()
            nn.functional.cross_entropy(top(embed(g, xs)), ys).backward()
            upd.step()


    if __name__ == "__main__":
        g, top = nn.Linear(6, 4), nn.Linear(4, 3)
        fit(g, top, torch.optim.Adam(itertools.chain(g.parameters(), top.parameters())), [])
    """
    assert _lines("DL201", source) == [7]
    assert _lines("DL201", source.replace("g(xs).detach()", "g(xs)")) == []
