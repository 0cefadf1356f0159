# source: https://github.com/eriklindernoren/PyTorch-GAN/blob/master/implementations/wgan_gp/wgan_gp.py
# category: DL505
# expect: clean
# evidence: the interpolates are built from real and detached fake images and then flagged requires_grad on purpose: the gradient penalty has a graph into the discriminator and its weights get a non-zero gradient from it
import numpy as np
import torch
import torch.autograd as autograd
import torch.nn as nn

latent_dim = 8
img_shape = (1, 4, 4)
lambda_gp = 10


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()
        self.model = nn.Sequential(nn.Linear(latent_dim, 32), nn.LeakyReLU(0.2), nn.Linear(32, int(np.prod(img_shape))), nn.Tanh())

    def forward(self, z):
        img = self.model(z)
        return img.view(img.shape[0], *img_shape)


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()
        self.model = nn.Sequential(nn.Linear(int(np.prod(img_shape)), 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))

    def forward(self, img):
        return self.model(img.view(img.shape[0], -1))


def compute_gradient_penalty(D, real_samples, fake_samples):
    """Calculates the gradient penalty loss for WGAN GP"""
    alpha = torch.rand(real_samples.size(0), 1, 1, 1)
    interpolates = (alpha * real_samples + ((1 - alpha) * fake_samples)).requires_grad_(True)
    d_interpolates = D(interpolates)
    fake = torch.ones(real_samples.shape[0], 1)
    gradients = autograd.grad(outputs=d_interpolates, inputs=interpolates, grad_outputs=fake,
                              create_graph=True, retain_graph=True, only_inputs=True)[0]
    gradients = gradients.view(gradients.size(0), -1)
    gradient_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean()
    return gradient_penalty


def discriminator_step(generator, discriminator, optimizer_D, real_imgs):
    optimizer_D.zero_grad()
    z = torch.randn(real_imgs.shape[0], latent_dim)
    fake_imgs = generator(z)
    real_validity = discriminator(real_imgs)
    fake_validity = discriminator(fake_imgs.detach())
    gradient_penalty = compute_gradient_penalty(discriminator, real_imgs, fake_imgs.detach())
    d_loss = -torch.mean(real_validity) + torch.mean(fake_validity) + lambda_gp * gradient_penalty
    d_loss.backward()
    optimizer_D.step()
    return gradient_penalty


if __name__ == "__main__":
    torch.manual_seed(0)
    generator, discriminator = Generator(), Discriminator()
    real_imgs = torch.randn(6, *img_shape)
    fake_imgs = generator(torch.randn(6, latent_dim)).detach()
    gp = compute_gradient_penalty(discriminator, real_imgs, fake_imgs)
    assert gp.grad_fn is not None
    grads = torch.autograd.grad(gp, list(discriminator.parameters()), allow_unused=True)
    assert sum(g.abs().sum() for g in grads if g is not None) > 0
    optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=1e-3)
    before = [p.detach().clone() for p in discriminator.parameters()]
    discriminator_step(generator, discriminator, optimizer_D, real_imgs)
    assert any(not torch.equal(b, p.detach()) for b, p in zip(before, discriminator.parameters()))
    print("evidence holds: the penalty is differentiated through D at requires_grad interpolates; D gets its gradient")
