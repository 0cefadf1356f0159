# source: https://github.com/martinarjovsky/WassersteinGAN/blob/master/main.py
# category: DL101
# expect: clean
# evidence: the critic weights, initialised far outside the cube, end within one optimizer step of [clamp_lower, clamp_upper], and the critic and generator both receive gradients and change
import torch
import torch.nn as nn
import torch.optim as optim

nz = 8
batchSize = 4


class DCGAN_D(nn.Module):
    def __init__(self, isize=8, nc=3, ndf=8):
        super(DCGAN_D, self).__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, 1, 4, 1, 0, bias=False),
        )

    def forward(self, input):
        output = self.main(input)
        return output.mean(0).view(1)


class DCGAN_G(nn.Module):
    def __init__(self, nc=3, ngf=8):
        super(DCGAN_G, self).__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf, 4, 1, 0, bias=False),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False),
            nn.Tanh(),
        )

    def forward(self, input):
        return self.main(input)


def train(netD, netG, optimizerD, optimizerG, data_iter, clamp_lower=-0.01, clamp_upper=0.01, Diters=2, gen_iters=2):
    one = torch.FloatTensor([1])
    mone = one * -1
    for gen_iterations in range(gen_iters):
        ############################
        # (1) Update D network
        ############################
        for p in netD.parameters():  # reset requires_grad
            p.requires_grad = True  # they are set to False below in netG update
        for _ in range(Diters):
            # clamp parameters to a cube
            for p in netD.parameters():
                p.data.clamp_(clamp_lower, clamp_upper)

            real_cpu = next(data_iter)
            netD.zero_grad()
            errD_real = netD(real_cpu)
            errD_real.backward(one)

            # train with fake
            noise = torch.randn(batchSize, nz, 1, 1)
            with torch.no_grad():  # totally freeze netG
                fake = netG(noise)
            errD_fake = netD(fake)
            errD_fake.backward(mone)
            optimizerD.step()

        ############################
        # (2) Update G network
        ############################
        for p in netD.parameters():
            p.requires_grad = False  # to avoid computation
        netG.zero_grad()
        noise = torch.randn(batchSize, nz, 1, 1)
        errG = netD(netG(noise))
        errG.backward(one)
        optimizerG.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    netD, netG = DCGAN_D(), DCGAN_G()
    optimizerD = optim.RMSprop(netD.parameters(), lr=5e-5)
    optimizerG = optim.RMSprop(netG.parameters(), lr=5e-5)
    assert max(p.abs().max().item() for p in netD.parameters()) > 0.05  # default init is far outside the cube
    d_before = [p.detach().clone() for p in netD.parameters()]
    g_before = [p.detach().clone() for p in netG.parameters()]
    data_iter = iter([torch.rand(batchSize, 3, 8, 8) * 2 - 1 for _ in range(8)])
    train(netD, netG, optimizerD, optimizerG, data_iter)
    # at most one RMSprop step (<= lr / sqrt(1 - alpha) = 5e-4) past the cube the weights were clipped to
    assert max(p.abs().max().item() for p in netD.parameters()) <= 0.01 + 5e-4 + 1e-6
    assert all(not torch.equal(b, p) for b, p in zip(d_before, netD.parameters()))
    assert all(not torch.equal(b, p) for b, p in zip(g_before, netG.parameters()))
    assert all(p.grad is not None for p in netG.parameters())
    print("evidence holds: critic weights stay clipped to the cube, both networks receive gradients and train")
