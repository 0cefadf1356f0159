# source: https://github.com/pytorch/examples/issues/116
# category: DL602
# expect: flag 78, 80, 89
# evidence: errD_fake.backward() frees netG's part of the graph, so the generator step raises "Trying to backward through the graph a second time"
import argparse

import torch
import torch.nn as nn
import torch.optim as optim

parser = argparse.ArgumentParser()
parser.add_argument('--nz', type=int, default=8, help='size of the latent z vector')
parser.add_argument('--ngf', type=int, default=8)
parser.add_argument('--ndf', type=int, default=8)
parser.add_argument('--lr', type=float, default=0.0002)
parser.add_argument('--beta1', type=float, default=0.5)
opt = parser.parse_args([])
nz, ngf, ndf, nc = opt.nz, opt.ngf, opt.ndf, 3
torch.manual_seed(0)


class _netG(nn.Module):
    def __init__(self):
        super(_netG, self).__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, input):
        return self.main(input)


class _netD(nn.Module):
    def __init__(self):
        super(_netD, self).__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, 1, 4, 1, 0, bias=False),
            nn.Sigmoid(),
        )

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


netG = _netG()
netD = _netD()
criterion = nn.BCELoss()
real_label = 1.
fake_label = 0.
optimizerD = optim.Adam(netD.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))


def train(dataloader, niter=1):
    for epoch in range(niter):
        for i, data in enumerate(dataloader, 0):
            # --- discriminator update ---
            # real batch
            netD.zero_grad()
            real_cpu = data[0]
            batch_size = real_cpu.size(0)
            label = torch.full((batch_size,), real_label)

            output = netD(real_cpu)
            errD_real = criterion(output, label)
            errD_real.backward()

            # generated batch
            noise = torch.randn(batch_size, nz, 1, 1)
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake)
            errD_fake = criterion(output, label)
            errD_fake.backward()
            errD = errD_real + errD_fake
            optimizerD.step()

            # --- generator update ---
            netG.zero_grad()
            label.fill_(real_label)  # G wants D to call its samples real
            output = netD(fake)
            errG = criterion(output, label)
            errG.backward()
            optimizerG.step()
            print('[%d][%d] Loss_D: %.4f Loss_G: %.4f' % (epoch, i, errD.item(), errG.item()))


if __name__ == "__main__":
    torch.manual_seed(0)
    dataloader = [(torch.rand(4, nc, 8, 8) * 2 - 1, torch.zeros(4)) for _ in range(2)]
    g_before = [p.detach().clone() for p in netG.parameters()]
    try:
        train(dataloader)
    except RuntimeError as e:
        assert "Trying to backward through the graph a second time" in str(e)
    else:
        raise AssertionError("expected the generator backward to fail")
    assert all(torch.equal(a, b) for a, b in zip(g_before, netG.parameters()))  # G never stepped
    print("evidence holds: the D step without fake.detach() frees G's graph; errG.backward() raises")
