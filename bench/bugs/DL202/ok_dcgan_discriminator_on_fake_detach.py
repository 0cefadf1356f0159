# source: https://github.com/pytorch/examples/blob/main/dcgan/main.py
# category: DL202
# expect: clean
# evidence: errD_fake (on fake.detach()) gives netG no gradient by design, and the generator step then moves netG
import torch
import torch.nn as nn
import torch.optim as optim

nz, ngf, ndf, nc = 8, 4, 4, 1
real_label = 1.
fake_label = 0.


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


def train(netG, netD, dataloader, niter=1):
    criterion = nn.BCELoss()
    optimizerD = optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))
    g_grad_after_d_step = None
    for epoch in range(niter):
        for i, data in enumerate(dataloader, 0):
            # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
            netD.zero_grad()
            real_cpu = data[0]
            batch_size = real_cpu.size(0)
            label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype)
            output = netD(real_cpu)
            errD_real = criterion(output, label)
            errD_real.backward()

            noise = torch.randn(batch_size, nz, 1, 1)
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach())
            errD_fake = criterion(output, label)
            errD_fake.backward()
            optimizerD.step()
            g_grad_after_d_step = [p.grad for p in netG.parameters()]

            # (2) Update G network: maximize log(D(G(z)))
            netG.zero_grad()
            label.fill_(real_label)
            output = netD(fake)
            errG = criterion(output, label)
            errG.backward()
            optimizerG.step()
    return g_grad_after_d_step


if __name__ == "__main__":
    torch.manual_seed(0)
    netG, netD = Generator(), Discriminator()
    before = [p.detach().clone() for p in netG.parameters()]
    dataloader = [(torch.randn(4, nc, 8, 8).tanh(), None)]
    g_grads = train(netG, netD, dataloader)
    assert all(g is None for g in g_grads)  # the discriminator step leaves the generator alone
    assert all(not torch.equal(b, p) for b, p in zip(before, netG.parameters()))
    print("evidence holds: D trains on fake.detach(); G still trains through netD(fake) in its own step")
