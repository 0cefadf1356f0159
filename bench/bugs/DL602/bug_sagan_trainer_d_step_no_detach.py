# source: https://github.com/heykeetae/Self-Attention-GAN/issues/48
# category: DL602
# expect: flag 90, 96
# evidence: d_loss.backward() sends gradients into G on every discriminator update (G holds non-zero .grad when d_optimizer steps; two backward passes reach G per step)
from types import SimpleNamespace

import torch
import torch.nn as nn


class Self_Attn(nn.Module):
    def __init__(self, in_dim):
        super().__init__()
        self.query_conv = nn.Conv2d(in_dim, max(in_dim // 8, 1), 1)
        self.key_conv = nn.Conv2d(in_dim, max(in_dim // 8, 1), 1)
        self.value_conv = nn.Conv2d(in_dim, in_dim, 1)
        self.gamma = nn.Parameter(torch.zeros(1))

    def forward(self, x):
        B, C, W, H = x.size()
        q = self.query_conv(x).view(B, -1, W * H).permute(0, 2, 1)
        k = self.key_conv(x).view(B, -1, W * H)
        attention = torch.softmax(torch.bmm(q, k), dim=-1)
        v = self.value_conv(x).view(B, -1, W * H)
        out = torch.bmm(v, attention.permute(0, 2, 1)).view(B, C, W, H)
        return self.gamma * out + x, attention


class Generator(nn.Module):
    def __init__(self, batch_size, image_size=8, z_dim=8, conv_dim=8):
        super().__init__()
        self.l1 = nn.Sequential(nn.ConvTranspose2d(z_dim, conv_dim, 4), nn.ReLU())
        self.l2 = nn.Sequential(nn.ConvTranspose2d(conv_dim, conv_dim, 4, 2, 1), nn.ReLU())
        self.attn1 = Self_Attn(conv_dim)
        self.attn2 = Self_Attn(conv_dim)
        self.last = nn.Sequential(nn.Conv2d(conv_dim, 3, 3, padding=1), nn.Tanh())

    def forward(self, z):
        z = z.view(z.size(0), z.size(1), 1, 1)
        out = self.l2(self.l1(z))
        out, p1 = self.attn1(out)
        out, p2 = self.attn2(out)
        return self.last(out), p1, p2


class Discriminator(nn.Module):
    def __init__(self, batch_size=4, image_size=8, conv_dim=8):
        super().__init__()
        self.l1 = nn.Sequential(nn.Conv2d(3, conv_dim, 4, 2, 1), nn.LeakyReLU(0.1))
        self.attn1 = Self_Attn(conv_dim)
        self.attn2 = Self_Attn(conv_dim)
        self.last = nn.Conv2d(conv_dim, 1, 4)

    def forward(self, x):
        out = self.l1(x)
        out, p1 = self.attn1(out)
        out, p2 = self.attn2(out)
        return self.last(out).squeeze(), p1, p2


class Trainer(object):
    def __init__(self, data_loader, config):
        self.data_loader = data_loader
        self.adv_loss = config.adv_loss
        self.imsize = config.imsize
        self.z_dim = config.z_dim
        self.total_step = config.total_step
        self.batch_size = config.batch_size
        self.g_lr, self.d_lr = config.g_lr, config.d_lr
        self.beta1, self.beta2 = config.beta1, config.beta2
        self.build_model()

    def train(self):
        data_iter = iter(self.data_loader)
        for step in range(self.total_step):
            # ================== Train D ================== #
            self.D.train()
            self.G.train()
            try:
                real_images, _ = next(data_iter)
            except StopIteration:
                data_iter = iter(self.data_loader)
                real_images, _ = next(data_iter)

            d_out_real, dr1, dr2 = self.D(real_images)
            d_loss_real = torch.nn.ReLU()(1.0 - d_out_real).mean()

            z = torch.randn(real_images.size(0), self.z_dim)
            fake_images, gf1, gf2 = self.G(z)
            d_out_fake, df1, df2 = self.D(fake_images)
            d_loss_fake = torch.nn.ReLU()(1.0 + d_out_fake).mean()

            # Backward + Optimize
            d_loss = d_loss_real + d_loss_fake
            self.reset_grad()
            d_loss.backward()
            self.d_optimizer.step()

            # ================== Train G and gumbel ================== #
            z = torch.randn(real_images.size(0), self.z_dim)
            fake_images, _, _ = self.G(z)

            g_out_fake, _, _ = self.D(fake_images)  # batch x n
            g_loss_fake = - g_out_fake.mean()

            self.reset_grad()
            g_loss_fake.backward()
            self.g_optimizer.step()

    def build_model(self):
        self.G = Generator(self.batch_size, self.imsize, self.z_dim)
        self.D = Discriminator(self.batch_size, self.imsize)
        self.g_optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, self.G.parameters()), self.g_lr, [self.beta1, self.beta2])
        self.d_optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, self.D.parameters()), self.d_lr, [self.beta1, self.beta2])

    def reset_grad(self):
        self.d_optimizer.zero_grad()
        self.g_optimizer.zero_grad()


if __name__ == "__main__":
    torch.manual_seed(0)
    config = SimpleNamespace(adv_loss='hinge', imsize=8, z_dim=8, total_step=3, batch_size=4,
                             g_lr=1e-4, d_lr=4e-4, beta1=0.0, beta2=0.9)
    loader = [(torch.rand(4, 3, 8, 8) * 2 - 1, torch.zeros(4)) for _ in range(2)]
    trainer = Trainer(loader, config)

    g_w = trainer.G.last[0].weight
    arrivals = []
    g_w.register_hook(lambda g: arrivals.append(1))
    g_has_grad_at_d_step = []
    trainer.d_optimizer.register_step_pre_hook(
        lambda o, a, kw: g_has_grad_at_d_step.append(g_w.grad is not None and bool(g_w.grad.abs().sum() > 0)))

    trainer.train()

    assert g_has_grad_at_d_step == [True] * config.total_step
    assert len(arrivals) == 2 * config.total_step
    print("evidence holds: every discriminator update back-propagates d_loss through the generator")
