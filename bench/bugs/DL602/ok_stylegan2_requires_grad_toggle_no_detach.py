# source: https://github.com/rosinality/stylegan2-pytorch/blob/master/train.py
# category: DL602
# expect: clean
# evidence: the D step feeds generator(noise) to the discriminator without detach, but requires_grad(generator, False) was set first, so fake_img carries no graph and the generator receives no gradient from d_loss.backward().
from types import SimpleNamespace

import torch
from torch import nn
from torch.nn import functional as F


def requires_grad(model, flag=True):
    for p in model.parameters():
        p.requires_grad = flag


def d_logistic_loss(real_pred, fake_pred):
    real_loss = F.softplus(-real_pred)
    fake_loss = F.softplus(fake_pred)
    return real_loss.mean() + fake_loss.mean()


def g_nonsaturating_loss(fake_pred):
    return F.softplus(-fake_pred).mean()


def mixing_noise(batch, latent_dim, prob, device):
    return [torch.randn(batch, latent_dim, device=device)]


class Generator(nn.Module):
    def __init__(self, latent=8, size=16):
        super().__init__()
        self.style = nn.Sequential(nn.Linear(latent, latent), nn.LeakyReLU(0.2))
        self.synth = nn.Linear(latent, size)

    def forward(self, styles):
        w = self.style(styles[0])
        return torch.tanh(self.synth(w)), w


class Discriminator(nn.Module):
    def __init__(self, size=16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(size, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))

    def forward(self, x):
        return self.net(x)


def train(args, loader, generator, discriminator, g_optim, d_optim, device):
    loss_dict = {}
    gen_grad_after_d = []
    for idx in range(args.iter):
        real_img = loader[idx % len(loader)].to(device)

        requires_grad(generator, False)
        requires_grad(discriminator, True)

        noise = mixing_noise(args.batch, args.latent, args.mixing, device)
        fake_img, _ = generator(noise)
        fake_pred = discriminator(fake_img)
        real_pred = discriminator(real_img)
        d_loss = d_logistic_loss(real_pred, fake_pred)

        loss_dict["d"] = d_loss
        discriminator.zero_grad()
        g_grads_before = [None if p.grad is None else p.grad.clone() for p in generator.parameters()]
        d_loss.backward()
        d_optim.step()
        untouched = all((b is None and p.grad is None) or (b is not None and torch.equal(b, p.grad))
                        for b, p in zip(g_grads_before, generator.parameters()))
        gen_grad_after_d.append(untouched and not fake_img.requires_grad)

        requires_grad(generator, True)
        requires_grad(discriminator, False)

        noise = mixing_noise(args.batch, args.latent, args.mixing, device)
        fake_img, _ = generator(noise)
        fake_pred = discriminator(fake_img)
        g_loss = g_nonsaturating_loss(fake_pred)

        loss_dict["g"] = g_loss
        generator.zero_grad()
        g_loss.backward()
        g_optim.step()
    return gen_grad_after_d, loss_dict


if __name__ == "__main__":
    torch.manual_seed(0)
    device = "cpu"
    args = SimpleNamespace(iter=4, batch=4, latent=8, mixing=0.9)
    generator, discriminator = Generator(), Discriminator()
    g_optim = torch.optim.Adam(generator.parameters(), lr=2e-3, betas=(0.0, 0.99))
    d_optim = torch.optim.Adam(discriminator.parameters(), lr=2e-3, betas=(0.0, 0.99))
    loader = [torch.rand(4, 16) * 2 - 1 for _ in range(2)]
    g0 = generator.synth.weight.detach().clone()

    flags, loss_dict = train(args, loader, generator, discriminator, g_optim, d_optim, device)
    assert len(flags) == args.iter and all(flags), flags
    assert not torch.equal(g0, generator.synth.weight)
    print("evidence holds: in all %d D steps fake_img had no graph and d_loss.backward() left the generator's "
          "gradients untouched (generator still trained in its own step)" % args.iter)
