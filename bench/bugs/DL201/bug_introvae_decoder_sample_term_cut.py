# source: https://github.com/dragen1860/IntroVAE-Pytorch/issues/3
# category: DL201
# expect: flag 69
# evidence: the decoder's adversarial term on prior samples (kl_samp) gives every decoder parameter a None gradient, so the decoder is trained by the other terms only
import torch
from torch import nn
from torch.nn import functional as F


class Encoder(nn.Module):
    def __init__(self, imgsz, z_dim):
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), nn.Linear(imgsz * imgsz, 64), nn.ReLU(), nn.Linear(64, 2 * z_dim))

    def forward(self, x):
        mu, logvar = self.net(x).chunk(2, dim=1)
        return mu, logvar


class Decoder(nn.Module):
    def __init__(self, imgsz, z_dim):
        super().__init__()
        self.imgsz = imgsz
        self.net = nn.Sequential(nn.Linear(z_dim, 64), nn.ReLU(), nn.Linear(64, imgsz * imgsz), nn.Sigmoid())

    def forward(self, z):
        return self.net(z).view(-1, 1, self.imgsz, self.imgsz)


class IntroVAE(nn.Module):
    def __init__(self, imgsz=8, z_dim=4, alpha=0.25, beta=1.0, margin=10.0, lr=1e-3):
        super().__init__()
        self.z_dim = z_dim
        self.alpha, self.beta, self.margin = alpha, beta, margin
        self.encoder = Encoder(imgsz, z_dim)
        self.decoder = Decoder(imgsz, z_dim)
        self.optim_encoder = torch.optim.Adam(self.encoder.parameters(), lr=lr)
        self.optim_decoder = torch.optim.Adam(self.decoder.parameters(), lr=lr)

    def reparametrization(self, mu, logvar):
        return mu + torch.randn_like(mu) * torch.exp(0.5 * logvar)

    def kld(self, mu, logvar):
        return -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), dim=1).mean()

    def update_encoder(self, x):
        mu, logvar = self.encoder(x)
        z = self.reparametrization(mu, logvar)
        xr = self.decoder(z)
        zp = torch.randn_like(z)
        xp = self.decoder(zp)
        mur, logvarr = self.encoder(xr.detach())
        mupp, logvarpp = self.encoder(xp.detach())
        loss_ae = F.mse_loss(xr, x, reduction="sum")
        encoder_adv = F.relu(self.margin - self.kld(mur, logvarr)) + F.relu(self.margin - self.kld(mupp, logvarpp))
        encoder_loss = self.kld(mu, logvar) + self.alpha * encoder_adv + self.beta * loss_ae
        self.optim_encoder.zero_grad()
        encoder_loss.backward()
        self.optim_encoder.step()
        return encoder_loss.item()

    def decoder_losses(self, x):
        mu, logvar = self.encoder(x)
        z = self.reparametrization(mu, logvar).detach()
        zp = torch.randn_like(z)
        xr = self.decoder(z)
        xp = self.decoder(zp)
        mur, logvarr = self.encoder(xr)
        mupp, logvarpp = self.encoder(xp.detach())
        return {
            "loss_ae": F.mse_loss(xr, x, reduction="sum"),
            "kl_rec": self.kld(mur, logvarr),
            "kl_samp": self.kld(mupp, logvarpp),
        }

    def update_decoder(self, x):
        losses = self.decoder_losses(x)
        decoder_adv = losses["kl_rec"] + losses["kl_samp"]
        decoder_loss = self.alpha * decoder_adv + self.beta * losses["loss_ae"]
        self.optim_decoder.zero_grad()
        decoder_loss.backward()
        self.optim_decoder.step()
        return decoder_loss.item()

    def forward(self, x):
        return self.update_encoder(x), self.update_decoder(x)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = IntroVAE()
    x = torch.rand(6, 1, 8, 8)
    model(x)
    losses = model.decoder_losses(x)
    assert losses["kl_samp"].requires_grad
    grads = torch.autograd.grad(losses["kl_samp"], list(model.decoder.parameters()), allow_unused=True)
    assert all(g is None for g in grads)
    grads_rec = torch.autograd.grad(losses["kl_rec"], list(model.decoder.parameters()), allow_unused=True)
    assert all(g is not None for g in grads_rec)
    print("evidence holds: kl_samp is in decoder_loss but reaches no decoder parameter; kl_rec does")
