# source: https://github.com/nikhilsinghmus/image2reverb/issues/37
# category: DL202
# expect: flag 69, 70
# evidence: with the L1 weight set to 0 the generator step's loss is nonzero, yet every generator gradient is zero
import torch
from torch import nn
import torch.nn.functional as F

G_LR = 2e-4
D_LR = 4e-4
ENC_LR = 1e-5
ADAM_BETA = (0.0, 0.99)
LAMBDA = 100


class Encoder(nn.Module):
    def __init__(self, channels=6):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, channels, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))

    def forward(self, x):
        return [self.net(x)]


class Generator(nn.Module):
    def __init__(self, latent_dimension):
        super().__init__()
        self.net = nn.Sequential(nn.ConvTranspose2d(latent_dimension, 8, 4), nn.ReLU(),
                                 nn.ConvTranspose2d(8, 1, 4, stride=2, padding=1))

    def forward(self, z):
        return self.net(z)


class Discriminator(nn.Module):
    def __init__(self, f_channels):
        super().__init__()
        self.spec = nn.Sequential(nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.LeakyReLU(0.2), nn.Flatten())
        self.out = nn.Linear(4 * 4 * 4 + f_channels, 1)

    def forward(self, spec, f):
        return self.out(torch.cat([self.spec(spec), f.flatten(1)], dim=1))


class Image2Reverb(nn.Module):
    def __init__(self, latent_dimension=16, f_channels=6):
        super().__init__()
        self._latent_dimension = latent_dimension
        self.enc = Encoder(f_channels)
        self.g = Generator(latent_dimension)
        self.d = Discriminator(f_channels)

    def forward(self, x):
        f = self.enc.forward(x)[0]
        z = torch.cat((f, torch.randn((f.shape[0], self._latent_dimension - f.shape[1], 1, 1))), 1)
        return self.g(z)

    def training_step(self, batch, batch_idx, optimizer_idx):
        spec, label, _ = batch
        spec.requires_grad = True

        f = self.enc.forward(label)[0]
        z = torch.cat((f, torch.randn((f.shape[0], self._latent_dimension - f.shape[1], 1, 1))), 1)
        fake_spec = self.g(z)
        d_fake = self.d(fake_spec.detach(), f)
        d_real = self.d(spec, f)

        if optimizer_idx == 0 or optimizer_idx == 1:  # train encoder or generator
            d_fake2 = self.d(fake_spec.detach(), f)
            G_loss1 = F.mse_loss(d_fake2, torch.ones(d_fake2.shape))
            G_loss2 = F.l1_loss(fake_spec, spec)
            G_loss = G_loss1 + (LAMBDA * G_loss2)
            return G_loss
        else:  # train discriminator
            l_fakeD = F.mse_loss(d_fake, torch.zeros(d_fake.shape))
            l_realD = F.mse_loss(d_real, torch.ones(d_real.shape))
            D_loss = (l_realD + l_fakeD)
            return D_loss

    def configure_optimizers(self):
        g_optim = torch.optim.Adam(self.g.parameters(), lr=G_LR, betas=ADAM_BETA)
        d_optim = torch.optim.Adam(self.d.parameters(), lr=D_LR, betas=ADAM_BETA)
        enc_optim = torch.optim.Adam(self.enc.parameters(), lr=ENC_LR, betas=ADAM_BETA)
        return [enc_optim, g_optim, d_optim], []


def fit(model, batches):
    """The automatic-optimization loop: every optimizer gets its own training_step call."""
    optimizers, _ = model.configure_optimizers()
    for batch_idx, batch in enumerate(batches):
        for optimizer_idx, opt in enumerate(optimizers):
            opt.zero_grad()
            loss = model.training_step(batch, batch_idx, optimizer_idx)
            loss.backward()
            opt.step()
    return optimizers


def make_batch(n=4):
    return torch.randn(n, 1, 8, 8), torch.randn(n, 3, 8, 8), None


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Image2Reverb()
    fit(model, [make_batch()])

    LAMBDA = 0  # keep only the adversarial term of the generator loss
    model.zero_grad(set_to_none=True)
    G_loss = model.training_step(make_batch(), 0, 1)
    assert G_loss.requires_grad and G_loss.detach() > 0
    G_loss.backward()
    assert all(p.grad is None or not p.grad.any() for p in model.g.parameters())
    assert any(p.grad is not None for p in model.d.parameters())  # the gradient stops inside D
    print("evidence holds: G_loss1 is computed on fake_spec.detach(); the generator gets no gradient from it")
