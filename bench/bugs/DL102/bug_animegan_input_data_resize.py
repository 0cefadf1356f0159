# source: https://github.com/jayleicn/animeGAN/issues/7
# category: DL102
# expect: flag 64, 65, 70
# evidence: on the last, smaller batch `input.data.resize_(...).copy_(...)` resizes only the .data alias: `input` keeps 4 rows, 2 of them stale images of the previous batch that netD is trained on
import torch
import torch.nn as nn
import torch.optim as optim

nz = 8
ngf = 8
ndf = 8
nc = 3
imageSize = 8
batchSize = 4
real_label = 1
fake_label = 0


class _netG(nn.Module):
    def __init__(self):
        super(_netG, self).__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
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
        output = self.main(input)
        return output.view(-1, 1).squeeze(1)


netG = _netG()
netD = _netD()
criterion = nn.BCELoss()

input = torch.FloatTensor(batchSize, 3, imageSize, imageSize)
noise = torch.FloatTensor(batchSize, nz, 1, 1)
label = torch.FloatTensor(batchSize)


def train_epoch(dataloader, optimizerD, optimizerG):
    for i, data in enumerate(dataloader, 0):
        # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
        netD.zero_grad()
        real_cpu, _ = data
        batch_size = real_cpu.size(0)
        input.data.resize_(real_cpu.size()).copy_(real_cpu)
        label.data.resize_(batch_size).fill_(real_label)
        output = netD(input)
        errD_real = criterion(output, label)
        errD_real.backward()

        noise.data.resize_(batch_size, nz, 1, 1)
        noise.normal_(0, 1)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        optimizerD.step()

        # (2) Update G network: maximize log(D(G(z)))
        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        optimizerG.step()
    return errD_real.item() + errD_fake.item(), errG.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    optimizerD = optim.Adam(netD.parameters(), lr=0.0002, betas=(0.5, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=0.0002, betas=(0.5, 0.999))
    first = torch.rand(4, 3, imageSize, imageSize)
    last = torch.rand(2, 3, imageSize, imageSize)  # the dataset does not divide by batchSize
    dataloader = [(first, None), (last, None)]
    train_epoch(dataloader, optimizerD, optimizerG)

    assert input.shape[0] == 4, input.shape  # should be 2 after the last batch
    assert torch.equal(input[:2], last)
    assert torch.equal(input[2:], first[2:]), "rows 2-3 are stale images from the previous batch"
    assert label.shape[0] == 4 and noise.shape[0] == 4
    print("evidence holds: after the 2-image batch `input` still has 4 rows, 2 stale images from the previous batch fed to netD")
