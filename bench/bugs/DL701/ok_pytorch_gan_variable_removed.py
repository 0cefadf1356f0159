# source: https://github.com/eriklindernoren/PyTorch-GAN/pull/205
# category: DL701
# expect: clean
# evidence: with the Variable wrappers removed, the legacy Tensor(...) constructors give plain tensors: labels and noise need no grad, G learns through D, D learns on gen_imgs.detach(), and the D step sends nothing into G
import argparse

import numpy as np
import torch
import torch.nn as nn

parser = argparse.ArgumentParser()
parser.add_argument("--n_epochs", type=int, default=1)
parser.add_argument("--lr", type=float, default=0.0002)
parser.add_argument("--b1", type=float, default=0.5)
parser.add_argument("--b2", type=float, default=0.999)
parser.add_argument("--latent_dim", type=int, default=8)
parser.add_argument("--img_size", type=int, default=6)
parser.add_argument("--channels", type=int, default=1)
opt = parser.parse_args([])

img_shape = (opt.channels, opt.img_size, opt.img_size)
cuda = True if torch.cuda.is_available() else False


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()

        def block(in_feat, out_feat, normalize=True):
            layers = [nn.Linear(in_feat, out_feat)]
            if normalize:
                layers.append(nn.BatchNorm1d(out_feat, 0.8))
            layers.append(nn.LeakyReLU(0.2, inplace=True))
            return layers

        self.model = nn.Sequential(
            *block(opt.latent_dim, 16, normalize=False),
            *block(16, 32),
            nn.Linear(32, int(np.prod(img_shape))),
            nn.Tanh()
        )

    def forward(self, z):
        img = self.model(z)
        return img.view(img.size(0), *img_shape)


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()
        self.model = nn.Sequential(
            nn.Linear(int(np.prod(img_shape)), 16),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(16, 1),
            nn.Sigmoid(),
        )

    def forward(self, img):
        return self.model(img.view(img.size(0), -1))


adversarial_loss = torch.nn.BCELoss()
torch.manual_seed(0)
generator = Generator()
discriminator = Discriminator()
optimizer_G = torch.optim.Adam(generator.parameters(), lr=opt.lr, betas=(opt.b1, opt.b2))
optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=opt.lr, betas=(opt.b1, opt.b2))

Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor


def train(dataloader):
    for epoch in range(opt.n_epochs):
        for i, (imgs, _) in enumerate(dataloader):
            # Adversarial ground truths
            valid = Tensor(imgs.size(0), 1).fill_(1.0)
            fake = Tensor(imgs.size(0), 1).fill_(0.0)

            # Configure input
            real_imgs = imgs.type(Tensor)

            # -----------------
            #  Train Generator
            # -----------------
            optimizer_G.zero_grad()
            z = Tensor(np.random.normal(0, 1, (imgs.shape[0], opt.latent_dim)))
            gen_imgs = generator(z)
            g_loss = adversarial_loss(discriminator(gen_imgs), valid)
            g_loss.backward()
            optimizer_G.step()

            # ---------------------
            #  Train Discriminator
            # ---------------------
            optimizer_D.zero_grad()
            real_loss = adversarial_loss(discriminator(real_imgs), valid)
            fake_loss = adversarial_loss(discriminator(gen_imgs.detach()), fake)
            d_loss = (real_loss + fake_loss) / 2
            d_loss.backward()
            optimizer_D.step()

            print("[Epoch %d/%d] [Batch %d/%d] [D loss: %f] [G loss: %f]"
                  % (epoch, opt.n_epochs, i, len(dataloader), d_loss.item(), g_loss.item()))


if __name__ == "__main__":
    np.random.seed(0)
    dataloader = [(torch.rand(4, *img_shape) * 2 - 1, torch.zeros(4)) for _ in range(3)]

    g_w, d_w = generator.model[0].weight, discriminator.model[0].weight
    g_count_at_d_step = []
    g_hits = []
    g_w.register_hook(lambda g: g_hits.append(1))
    optimizer_D.register_step_pre_hook(lambda o, a, kw: g_count_at_d_step.append(len(g_hits)))
    g0, d0 = g_w.detach().clone(), d_w.detach().clone()

    train(dataloader)

    assert g_count_at_d_step == [1, 2, 3]  # only g_loss reaches the generator
    assert not torch.equal(g0, g_w) and not torch.equal(d0, d_w)
    valid = Tensor(2, 1).fill_(1.0)
    assert type(valid) is torch.Tensor and not valid.requires_grad and valid.is_leaf
    print("evidence holds: without Variable the script is plain-tensor code and both networks train as intended")
