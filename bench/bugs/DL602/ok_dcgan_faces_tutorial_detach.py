# source: https://github.com/pytorch/tutorials/blob/main/beginner_source/dcgan_faces_tutorial.py
# category: DL602
# expect: clean
# evidence: the discriminator step classifies fake.detach(), so errD_fake.backward() leaves the generator's gradients untouched; the generator is then updated through netD(fake) in its own step.
import torch
import torch.nn as nn
import torch.optim as optim

nz = 8
ngf = 8
ndf = 8
nc = 1
lr = 0.0002
beta1 = 0.5
num_epochs = 1
device = torch.device("cpu")


class Generator(nn.Module):
    def __init__(self, ngpu):
        super(Generator, self).__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 2),
            nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),
            nn.Tanh()
        )

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self, ngpu):
        super(Discriminator, self).__init__()
        self.ngpu = ngpu
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, 1, 4, 1, 0, bias=False),
            nn.Sigmoid()
        )

    def forward(self, input):
        return self.main(input)


if __name__ == "__main__":
    torch.manual_seed(0)
    netG = Generator(0).to(device)
    netD = Discriminator(0).to(device)
    criterion = nn.BCELoss()
    fixed_noise = torch.randn(4, nz, 1, 1, device=device)
    real_label = 1.
    fake_label = 0.
    optimizerD = optim.Adam(netD.parameters(), lr=lr, betas=(beta1, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=lr, betas=(beta1, 0.999))
    dataloader = [(torch.randn(4, nc, 8, 8), torch.zeros(4)) for _ in range(3)]

    g_grad_after_D = []
    g_calls = [0]
    for p in netG.parameters():
        p.register_hook(lambda g: g_calls.__setitem__(0, g_calls[0] + 1))
    G_before = [p.detach().clone() for p in netG.parameters()]

    img_list = []
    G_losses = []
    D_losses = []
    iters = 0

    for epoch in range(num_epochs):
        for i, data in enumerate(dataloader, 0):

            ############################
            # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
            ###########################
            g_calls_at_start = g_calls[0]
            ## Train with all-real batch
            netD.zero_grad()
            real_cpu = data[0].to(device)
            b_size = real_cpu.size(0)
            label = torch.full((b_size,), real_label, dtype=torch.float, device=device)
            output = netD(real_cpu).view(-1)
            errD_real = criterion(output, label)
            errD_real.backward()
            D_x = output.mean().item()

            ## Train with all-fake batch
            noise = torch.randn(b_size, nz, 1, 1, device=device)
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach()).view(-1)
            errD_fake = criterion(output, label)
            errD_fake.backward()
            D_G_z1 = output.mean().item()
            errD = errD_real + errD_fake
            optimizerD.step()

            g_grad_after_D.append(g_calls[0] == g_calls_at_start)

            ############################
            # (2) Update G network: maximize log(D(G(z)))
            ###########################
            netG.zero_grad()
            label.fill_(real_label)  # fake labels are real for generator cost
            output = netD(fake).view(-1)
            errG = criterion(output, label)
            errG.backward()
            D_G_z2 = output.mean().item()
            optimizerG.step()

            G_losses.append(errG.item())
            D_losses.append(errD.item())
            iters += 1

    assert g_grad_after_D == [True, True, True] and g_calls[0] > 0
    assert all(not torch.equal(b, p.detach()) for b, p in zip(G_before, netG.parameters()))
    print("evidence holds: no generator gradient appeared during the 3 D steps; the generator still trained in its own step")
