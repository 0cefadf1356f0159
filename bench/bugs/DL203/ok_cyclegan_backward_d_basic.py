# source: https://github.com/junyanz/pytorch-CycleGAN-and-pix2pix/issues/388
# category: DL203
# expect: clean
# evidence: loss_D mixes netD(real) and netD(fake.detach()); it still has a grad_fn through netD, so loss_D.backward() fills the discriminator gradients (and leaves the generator gradients untouched) and optimizer_D.step() changes netD
import itertools
import random

import torch
import torch.nn as nn

torch.manual_seed(0)
random.seed(0)


class GANLoss(nn.Module):
    def __init__(self, gan_mode='lsgan', target_real_label=1.0, target_fake_label=0.0):
        super(GANLoss, self).__init__()
        self.register_buffer('real_label', torch.tensor(target_real_label))
        self.register_buffer('fake_label', torch.tensor(target_fake_label))
        self.loss = nn.MSELoss()

    def get_target_tensor(self, prediction, target_is_real):
        target_tensor = self.real_label if target_is_real else self.fake_label
        return target_tensor.expand_as(prediction)

    def __call__(self, prediction, target_is_real):
        return self.loss(prediction, self.get_target_tensor(prediction, target_is_real))


class ImagePool():
    def __init__(self, pool_size):
        self.pool_size = pool_size
        if self.pool_size > 0:
            self.num_imgs = 0
            self.images = []

    def query(self, images):
        if self.pool_size == 0:
            return images
        return_images = []
        for image in images:
            image = torch.unsqueeze(image.data, 0)
            if self.num_imgs < self.pool_size:
                self.num_imgs = self.num_imgs + 1
                self.images.append(image)
                return_images.append(image)
            else:
                p = random.uniform(0, 1)
                if p > 0.5:
                    random_id = random.randint(0, self.pool_size - 1)
                    tmp = self.images[random_id].clone()
                    self.images[random_id] = image
                    return_images.append(tmp)
                else:
                    return_images.append(image)
        return torch.cat(return_images, 0)


def define_G():
    return nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.ReLU(True), nn.Conv2d(8, 3, 3, 1, 1), nn.Tanh())


def define_D():
    return nn.Sequential(nn.Conv2d(3, 8, 4, 2, 1), nn.LeakyReLU(0.2, True), nn.Conv2d(8, 1, 4, 1, 1))


class CycleGANModel():
    def __init__(self):
        self.netG_A = define_G()
        self.netG_B = define_G()
        self.netD_A = define_D()
        self.netD_B = define_D()
        self.fake_A_pool = ImagePool(4)
        self.fake_B_pool = ImagePool(4)
        self.criterionGAN = GANLoss()
        self.criterionCycle = torch.nn.L1Loss()
        self.optimizer_G = torch.optim.Adam(itertools.chain(self.netG_A.parameters(), self.netG_B.parameters()), lr=2e-4, betas=(0.5, 0.999))
        self.optimizer_D = torch.optim.Adam(itertools.chain(self.netD_A.parameters(), self.netD_B.parameters()), lr=2e-4, betas=(0.5, 0.999))
        self.lambda_A = 10.0
        self.lambda_B = 10.0

    def set_input(self, input):
        self.real_A = input['A']
        self.real_B = input['B']

    def forward(self):
        self.fake_B = self.netG_A(self.real_A)  # G_A(A)
        self.rec_A = self.netG_B(self.fake_B)   # G_B(G_A(A))
        self.fake_A = self.netG_B(self.real_B)  # G_B(B)
        self.rec_B = self.netG_A(self.fake_A)   # G_A(G_B(B))

    def set_requires_grad(self, nets, requires_grad=False):
        if not isinstance(nets, list):
            nets = [nets]
        for net in nets:
            if net is not None:
                for param in net.parameters():
                    param.requires_grad = requires_grad

    def backward_D_basic(self, netD, real, fake):
        # Real
        pred_real = netD(real)
        loss_D_real = self.criterionGAN(pred_real, True)
        # Fake
        pred_fake = netD(fake.detach())
        loss_D_fake = self.criterionGAN(pred_fake, False)
        # Combined loss and calculate gradients
        loss_D = (loss_D_real + loss_D_fake) * 0.5
        loss_D.backward()
        return loss_D

    def backward_D_A(self):
        fake_B = self.fake_B_pool.query(self.fake_B)
        self.loss_D_A = self.backward_D_basic(self.netD_A, self.real_B, fake_B)

    def backward_D_B(self):
        fake_A = self.fake_A_pool.query(self.fake_A)
        self.loss_D_B = self.backward_D_basic(self.netD_B, self.real_A, fake_A)

    def backward_G(self):
        self.loss_G_A = self.criterionGAN(self.netD_A(self.fake_B), True)
        self.loss_G_B = self.criterionGAN(self.netD_B(self.fake_A), True)
        self.loss_cycle_A = self.criterionCycle(self.rec_A, self.real_A) * self.lambda_A
        self.loss_cycle_B = self.criterionCycle(self.rec_B, self.real_B) * self.lambda_B
        self.loss_G = self.loss_G_A + self.loss_G_B + self.loss_cycle_A + self.loss_cycle_B
        self.loss_G.backward()

    def optimize_parameters(self):
        self.forward()
        # G_A and G_B
        self.set_requires_grad([self.netD_A, self.netD_B], False)
        self.optimizer_G.zero_grad()
        self.backward_G()
        self.optimizer_G.step()
        g_grads = [p.grad.clone() for p in self.netG_A.parameters()]
        # D_A and D_B
        self.set_requires_grad([self.netD_A, self.netD_B], True)
        self.optimizer_D.zero_grad()
        self.backward_D_A()
        self.backward_D_B()
        d_grads_ok = all(p.grad is not None and p.grad.abs().sum() > 0
                         for p in itertools.chain(self.netD_A.parameters(), self.netD_B.parameters()))
        g_untouched = all(torch.equal(g, p.grad) for g, p in zip(g_grads, self.netG_A.parameters()))
        self.optimizer_D.step()
        return d_grads_ok, g_untouched


if __name__ == "__main__":
    model = CycleGANModel()
    d_before = [p.detach().clone() for p in model.netD_A.parameters()]
    for i in range(2):
        model.set_input({'A': torch.rand(2, 3, 16, 16) * 2 - 1, 'B': torch.rand(2, 3, 16, 16) * 2 - 1})
        d_grads_ok, g_untouched = model.optimize_parameters()
        assert d_grads_ok and g_untouched
    assert model.loss_D_A.grad_fn is not None
    assert all(not torch.equal(b, p.detach()) for b, p in zip(d_before, model.netD_A.parameters()))
    print("evidence holds: loss_D_A (%.4f) has a grad_fn, backward fills every netD gradient, leaves netG's "
          "gradients as they were, and netD_A changes" % model.loss_D_A.item())
