# source: https://github.com/woozzu/tagan/issues/19
# category: DL602
# expect: clean
# evidence: the discriminator update scores fake.detach(), so its backward leaves the generator without gradients; the generator step regenerates fake and trains G through D as intended.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import zeros_like, ones_like


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.txt_encoder = nn.Linear(6, 4)
        self.mu_logvar = nn.Linear(4, 8)
        self.decoder = nn.Linear(12 + 4, 12)

    def forward(self, img, txt):
        h = torch.tanh(self.txt_encoder(txt))
        z_mean, z_log_stddev = self.mu_logvar(h).chunk(2, dim=1)
        z = z_mean + torch.exp(z_log_stddev) * torch.randn_like(z_mean)
        return torch.tanh(self.decoder(torch.cat([img, z], dim=1))), (z_mean, z_log_stddev)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.img_net = nn.Linear(12, 8)
        self.txt_net = nn.Linear(6, 8)
        self.out = nn.Linear(8, 1)

    def forward(self, img, txt):
        h = torch.relu(self.img_net(img) + self.txt_net(txt))
        return self.out(h), h


def train_step(G, D, g_optimizer, d_optimizer, img, txt_m, record):
    # UPDATE DISCRIMINATOR
    D.zero_grad()
    real_logit, _ = D(img, txt_m)
    real_loss = F.binary_cross_entropy_with_logits(real_logit, ones_like(real_logit))
    real_loss.backward()

    fake, _ = G(img, txt_m)
    fake_logit, _ = D(fake.detach(), txt_m)
    fake_loss = F.binary_cross_entropy_with_logits(fake_logit, zeros_like(fake_logit))
    fake_loss.backward()
    record['G_grads_after_D'] = [p.grad for p in G.parameters()]
    d_optimizer.step()

    # UPDATE GENERATOR
    G.zero_grad()
    fake, (z_mean, z_log_stddev) = G(img, txt_m)
    kld = torch.mean(-z_log_stddev + 0.5 * (torch.exp(2 * z_log_stddev) + torch.pow(z_mean, 2) - 1))
    fake_logit, _ = D(fake, txt_m)
    fake_loss = F.binary_cross_entropy_with_logits(fake_logit, ones_like(fake_logit))
    G_loss = fake_loss + 0.5 * kld
    G_loss.backward()
    g_optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    G, D = Generator(), Discriminator()
    g_optimizer = torch.optim.Adam(G.parameters(), lr=1e-3)
    d_optimizer = torch.optim.Adam(D.parameters(), lr=1e-3)
    img, txt_m = torch.randn(4, 12), torch.randn(4, 6)
    g0 = [p.detach().clone() for p in G.parameters()]
    record = {}
    train_step(G, D, g_optimizer, d_optimizer, img, txt_m, record)

    assert all(g is None for g in record['G_grads_after_D']), "D update did not reach the generator"
    assert any(not torch.equal(a, b) for a, b in zip(g0, G.parameters())), "G step trained G"
    print("evidence holds: generator had no gradients after the D update and changed after its own step")
