# source: https://github.com/junyanz/pytorch-CycleGAN-and-pix2pix/blob/master/models/pix2pix_model.py
# category: DL602
# expect: clean
# evidence: backward_D feeds fake_AB.detach() so netG gets no gradient from the D loss; backward_G feeds the live fake with netD frozen, so only netG gets gradients, and both nets train
import torch
import torch.nn as nn


class GANLoss(nn.Module):
    def __init__(self, gan_mode='vanilla', target_real_label=1.0, target_fake_label=0.0):
        super().__init__()
        self.register_buffer('real_label', torch.tensor(target_real_label))
        self.register_buffer('fake_label', torch.tensor(target_fake_label))
        self.loss = nn.BCEWithLogitsLoss()

    def __call__(self, prediction, target_is_real):
        target_tensor = (self.real_label if target_is_real else self.fake_label).expand_as(prediction)
        return self.loss(prediction, target_tensor)


class Pix2PixModel:
    def __init__(self, input_nc=3, output_nc=3, lambda_L1=100.0, lr=2e-4):
        self.netG = nn.Sequential(nn.Conv2d(input_nc, 8, 3, padding=1), nn.ReLU(True),
                                  nn.Conv2d(8, output_nc, 3, padding=1), nn.Tanh())
        self.netD = nn.Sequential(nn.Conv2d(input_nc + output_nc, 8, 4, 2, 1), nn.LeakyReLU(0.2, True),
                                  nn.Conv2d(8, 1, 4, 1, 1))
        self.criterionGAN = GANLoss('vanilla')
        self.criterionL1 = torch.nn.L1Loss()
        self.lambda_L1 = lambda_L1
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=lr, betas=(0.5, 0.999))
        self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=lr, betas=(0.5, 0.999))

    def set_input(self, input):
        self.real_A = input['A']
        self.real_B = input['B']

    def forward(self):
        self.fake_B = self.netG(self.real_A)

    def set_requires_grad(self, nets, requires_grad=False):
        if not isinstance(nets, list):
            nets = [nets]
        for net in nets:
            if net is not None:
                for param in net.parameters():
                    param.requires_grad = requires_grad

    def backward_D(self):
        # fake pair: stop the gradient at the generator output
        fake_AB = torch.cat((self.real_A, self.fake_B), 1)
        pred_fake = self.netD(fake_AB.detach())
        self.loss_D_fake = self.criterionGAN(pred_fake, False)
        # real pair
        real_AB = torch.cat((self.real_A, self.real_B), 1)
        pred_real = self.netD(real_AB)
        self.loss_D_real = self.criterionGAN(pred_real, True)
        self.loss_D = (self.loss_D_fake + self.loss_D_real) * 0.5
        self.loss_D.backward()

    def backward_G(self):
        # G has to fool D
        fake_AB = torch.cat((self.real_A, self.fake_B), 1)
        pred_fake = self.netD(fake_AB)
        self.loss_G_GAN = self.criterionGAN(pred_fake, True)
        # and stay close to the target
        self.loss_G_L1 = self.criterionL1(self.fake_B, self.real_B) * self.lambda_L1
        self.loss_G = self.loss_G_GAN + self.loss_G_L1
        self.loss_G.backward()

    def optimize_parameters(self):
        self.forward()
        # update D
        self.set_requires_grad(self.netD, True)
        self.optimizer_D.zero_grad()
        self.backward_D()
        self.optimizer_D.step()
        # update G
        self.set_requires_grad(self.netD, False)
        self.optimizer_G.zero_grad()
        self.backward_G()
        self.optimizer_G.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Pix2PixModel()
    g_w, d_w = model.netG[0].weight, model.netD[0].weight
    g_arrivals, d_arrivals = [], []
    g_w.register_hook(lambda g: g_arrivals.append(1))
    d_w.register_hook(lambda g: d_arrivals.append(1))
    g_grad_at_d_step = []
    model.optimizer_D.register_step_pre_hook(lambda o, a, kw: g_grad_at_d_step.append(len(g_arrivals)))
    g0, d0 = g_w.detach().clone(), d_w.detach().clone()

    steps = 3
    for _ in range(steps):
        model.set_input({'A': torch.rand(2, 3, 8, 8), 'B': torch.rand(2, 3, 8, 8)})
        model.optimize_parameters()

    assert g_grad_at_d_step == list(range(steps))  # backward_D sent nothing into G
    assert len(g_arrivals) == steps  # G is reached once per iteration, by loss_G only
    assert len(d_arrivals) == steps  # D is reached by loss_D only (frozen during backward_G)
    assert not torch.equal(g0, g_w) and not torch.equal(d0, d_w)
    print("evidence holds: D trains on the detached fake, G trains through the frozen D; no cross-talk")
