# source: https://github.com/junyanz/pytorch-CycleGAN-and-pix2pix/issues/439
# category: DL602
# expect: flag 80, 82
# evidence: backward_D detaches fake_AB for pred_fake but hands the undetached fake_AB to the gradient penalty, so loss_D.backward() flows into netG and frees its graph; the second critic update raises "Trying to backward through the graph a second time".
import torch
import torch.nn as nn


def cal_gradient_penalty(netD, real_data, fake_data, device, type='mixed', constant=1.0, lambda_gp=10.0):
    if lambda_gp > 0.0:
        if type == 'real':
            interpolatesv = real_data
        elif type == 'fake':
            interpolatesv = fake_data
        elif type == 'mixed':
            alpha = torch.rand(real_data.shape[0], 1, device=device)
            alpha = alpha.expand(real_data.shape[0], real_data.nelement() // real_data.shape[0]).contiguous().view(*real_data.shape)
            interpolatesv = alpha * real_data + ((1 - alpha) * fake_data)
        else:
            raise NotImplementedError('{} not implemented'.format(type))
        interpolatesv.requires_grad_(True)
        disc_interpolates = netD(interpolatesv)
        gradients = torch.autograd.grad(outputs=disc_interpolates, inputs=interpolatesv,
                                        grad_outputs=torch.ones(disc_interpolates.size()).to(device),
                                        create_graph=True, retain_graph=True, only_inputs=True)
        gradients = gradients[0].view(real_data.size(0), -1)
        gradient_penalty = (((gradients + 1e-16).norm(2, dim=1) - constant) ** 2).mean() * lambda_gp
        return gradient_penalty, gradients
    else:
        return 0.0, None


class GANLoss(nn.Module):
    def __init__(self, gan_mode='wgangp'):
        super().__init__()
        self.gan_mode = gan_mode

    def __call__(self, prediction, target_is_real):
        return -prediction.mean() if target_is_real else prediction.mean()


class Pix2PixModel:
    def __init__(self, opt):
        self.device = torch.device('cpu')
        self.netG = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 3, padding=1), nn.Tanh())
        self.netD = nn.Sequential(nn.Conv2d(2, 8, 4, stride=2, padding=1), nn.LeakyReLU(0.2),
                                  nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.LeakyReLU(0.2),
                                  nn.Conv2d(8, 1, 3, padding=1))  # PatchGAN-style
        self.criterionGAN = GANLoss(opt.gan_mode)
        self.criterionL1 = nn.L1Loss()
        self.lambda_L1 = opt.lambda_L1
        self.L_GP = opt.lambda_gp
        self.n_critic = opt.n_critic
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=opt.lr, betas=(0.5, 0.999))
        self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=opt.lr, betas=(0.5, 0.999))

    def set_requires_grad(self, nets, requires_grad=False):
        for net in (nets if isinstance(nets, list) else [nets]):
            for param in net.parameters():
                param.requires_grad = requires_grad

    def set_input(self, input):
        self.real_A = input['A'].to(self.device)
        self.real_B = input['B'].to(self.device)

    def forward(self):
        self.fake_B = self.netG(self.real_A)

    def backward_D(self):
        """Calculate GAN loss for the discriminator"""
        # Fake; stop backprop to the generator by detaching fake_B
        fake_AB = torch.cat((self.real_A, self.fake_B), 1)
        pred_fake = self.netD(fake_AB.detach())
        self.loss_D_fake = self.criterionGAN(pred_fake, False)
        # Real
        real_AB = torch.cat((self.real_A, self.real_B), 1)
        pred_real = self.netD(real_AB)
        self.loss_D_real = self.criterionGAN(pred_real, True)
        # gradient penalty
        self.gradient_penalty, self.gradients = cal_gradient_penalty(self.netD, real_AB, fake_AB, self.device, lambda_gp=self.L_GP)
        self.loss_D = self.loss_D_fake + self.loss_D_real + self.gradient_penalty
        self.loss_D.backward()

    def backward_G(self):
        fake_AB = torch.cat((self.real_A, self.fake_B), 1)
        pred_fake = self.netD(fake_AB)
        self.loss_G_GAN = self.criterionGAN(pred_fake, True)
        self.loss_G_L1 = self.criterionL1(self.fake_B, self.real_B) * self.lambda_L1
        self.loss_G = self.loss_G_GAN + self.loss_G_L1
        self.loss_G.backward()

    def optimize_parameters(self):
        self.forward()                   # compute fake images: G(A)
        self.set_requires_grad(self.netD, True)
        for _ in range(self.n_critic):   # update D several times before G
            self.optimizer_D.zero_grad()
            self.backward_D()
            self.optimizer_D.step()
            self.g_grad_after_D = sum(p.grad.abs().sum().item() for p in self.netG.parameters() if p.grad is not None)
        self.set_requires_grad(self.netD, False)
        self.optimizer_G.zero_grad()
        self.backward_G()
        self.optimizer_G.step()


if __name__ == "__main__":
    from types import SimpleNamespace
    torch.manual_seed(0)
    opt = SimpleNamespace(gan_mode='wgangp', lambda_L1=100.0, lambda_gp=10.0, n_critic=2, lr=2e-4)
    model = Pix2PixModel(opt)
    model.set_input({'A': torch.randn(2, 1, 8, 8), 'B': torch.randn(2, 1, 8, 8)})

    try:
        model.optimize_parameters()
    except RuntimeError as e:
        msg = str(e)
    else:
        raise AssertionError("expected the second critic update to fail")
    assert "backward through the graph a second time" in msg, msg
    assert model.g_grad_after_D > 0
    print("evidence holds: the first D update pushed gradient mass %.3f into netG, then the second raised "
          "RuntimeError: %s" % (model.g_grad_after_D, msg.splitlines()[0][:70]))
