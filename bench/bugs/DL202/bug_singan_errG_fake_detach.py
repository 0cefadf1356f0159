# source: https://github.com/tamarott/SinGAN/pull/117
# category: DL202
# expect: flag 111, 113
# evidence: errG is computed from netD(fake.detach()), so errG.backward() leaves every netG parameter with grad None; the generator is then updated by the reconstruction loss alone
import torch
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(0)


class ConvBlock(nn.Sequential):
    def __init__(self, in_channel, out_channel, ker_size, padd, stride):
        super(ConvBlock, self).__init__()
        self.add_module('conv', nn.Conv2d(in_channel, out_channel, kernel_size=ker_size, stride=stride, padding=padd))
        self.add_module('norm', nn.BatchNorm2d(out_channel))
        self.add_module('LeakyRelu', nn.LeakyReLU(0.2, inplace=True))


class WDiscriminator(nn.Module):
    def __init__(self, opt):
        super(WDiscriminator, self).__init__()
        N = int(opt.nfc)
        self.head = ConvBlock(opt.nc_im, N, opt.ker_size, opt.padd_size, 1)
        self.body = nn.Sequential(ConvBlock(N, N, opt.ker_size, opt.padd_size, 1))
        self.tail = nn.Conv2d(N, 1, kernel_size=opt.ker_size, stride=1, padding=opt.padd_size)

    def forward(self, x):
        x = self.head(x)
        x = self.body(x)
        x = self.tail(x)
        return x


class GeneratorConcatSkip2CleanAdd(nn.Module):
    def __init__(self, opt):
        super(GeneratorConcatSkip2CleanAdd, self).__init__()
        N = opt.nfc
        self.head = ConvBlock(opt.nc_im, N, opt.ker_size, opt.padd_size, 1)
        self.body = nn.Sequential(ConvBlock(N, N, opt.ker_size, opt.padd_size, 1))
        self.tail = nn.Sequential(nn.Conv2d(N, opt.nc_im, kernel_size=opt.ker_size, stride=1, padding=opt.padd_size), nn.Tanh())

    def forward(self, x, y):
        x = self.head(x)
        x = self.body(x)
        x = self.tail(x)
        return x + y


class Opt:
    nfc = 8
    nc_im = 3
    ker_size = 3
    padd_size = 1
    Dsteps = 1
    Gsteps = 1
    lr_d = 5e-4
    lr_g = 5e-4
    beta1 = 0.5
    lambda_grad = 0.1
    alpha = 10
    noise_amp = 0.1
    niter = 2
    mode = 'train'


def calc_gradient_penalty(netD, real_data, fake_data, LAMBDA):
    alpha = torch.rand(1, 1).expand(real_data.size())
    interpolates = alpha * real_data + ((1 - alpha) * fake_data)
    interpolates = interpolates.requires_grad_(True)
    disc_interpolates = netD(interpolates)
    gradients = torch.autograd.grad(outputs=disc_interpolates, inputs=interpolates,
                                    grad_outputs=torch.ones(disc_interpolates.size()),
                                    create_graph=True, retain_graph=True, only_inputs=True)[0]
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean() * LAMBDA


def train_single_scale(netD, netG, real, opt, log):
    z_opt = torch.randn_like(real)
    optimizerD = optim.Adam(netD.parameters(), lr=opt.lr_d, betas=(opt.beta1, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=opt.lr_g, betas=(opt.beta1, 0.999))
    z_prev = torch.zeros_like(real)

    for epoch in range(opt.niter):
        noise_ = torch.randn_like(real)
        ############################
        # (1) Update D network: maximize D(x) + D(G(z))
        ###########################
        for j in range(opt.Dsteps):
            netD.zero_grad()
            output = netD(real)
            errD_real = -output.mean()
            errD_real.backward(retain_graph=True)

            prev = z_prev
            noise = opt.noise_amp * noise_ + prev
            fake = netG(noise.detach(), prev)
            output = netD(fake.detach())
            errD_fake = output.mean()
            errD_fake.backward(retain_graph=True)

            gradient_penalty = calc_gradient_penalty(netD, real, fake, opt.lambda_grad)
            gradient_penalty.backward()
            optimizerD.step()

        ############################
        # (2) Update G network: maximize D(G(z))
        ###########################
        for j in range(opt.Gsteps):
            netG.zero_grad()
            output = netD(fake.detach())
            errG = -output.mean()
            errG.backward(retain_graph=True)
            log['g_grads_after_errG'].append([p.grad for p in netG.parameters()])
            if opt.alpha != 0:
                loss = nn.MSELoss()
                Z_opt = opt.noise_amp * z_opt + z_prev
                rec_loss = opt.alpha * loss(netG(Z_opt.detach(), z_prev), real)
                rec_loss.backward(retain_graph=True)
                rec_loss = rec_loss.detach()
            else:
                Z_opt = z_opt
                rec_loss = 0
            log['g_grad_norm'].append(sum(p.grad.norm().item() for p in netG.parameters()))
            optimizerG.step()
    return z_opt


if __name__ == "__main__":
    opt = Opt()
    real = torch.rand(1, 3, 16, 16) * 2 - 1
    netD = WDiscriminator(opt)
    netG = GeneratorConcatSkip2CleanAdd(opt)
    log = {'g_grads_after_errG': [], 'g_grad_norm': []}
    train_single_scale(netD, netG, real, opt, log)
    assert all(g is None for grads in log['g_grads_after_errG'] for g in grads)
    assert all(n > 0 for n in log['g_grad_norm'])
    print("evidence holds: after errG.backward() all %d netG parameters still have grad None at every G step; "
          "netG only receives the reconstruction-loss gradient" % len(log['g_grads_after_errG'][0]))
