# source: https://github.com/XPixelGroup/BasicSR/blob/master/basicsr/models/esrgan_model.py
# category: DL602
# expect: clean
# evidence: the discriminator step uses self.output.detach() (no gradient reaches net_g from the D loss); the generator step feeds the live output to a frozen net_d; both nets train
from collections import OrderedDict

import torch
import torch.nn as nn


class GANLoss(nn.Module):
    """Vanilla GAN loss on logits, as used with the relativistic average formulation."""

    def __init__(self, loss_weight=5e-3):
        super().__init__()
        self.loss_weight = loss_weight
        self.loss = nn.BCEWithLogitsLoss()

    def forward(self, input, target_is_real, is_disc=False):
        target = torch.full_like(input, 1.0 if target_is_real else 0.0)
        loss = self.loss(input, target)
        return loss if is_disc else loss * self.loss_weight


class SRGANModel:
    def __init__(self, scale=2):
        self.net_g = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.LeakyReLU(0.2),
                                   nn.Upsample(scale_factor=scale), nn.Conv2d(8, 3, 3, padding=1))
        self.net_d = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.LeakyReLU(0.2), nn.Flatten(), nn.LazyLinear(1))
        self.cri_pix = nn.L1Loss()
        self.cri_gan = GANLoss()
        self.net_d_iters = 1
        self.net_d_init_iters = 0
        self.net_d(torch.zeros(1, 3, 8 * scale, 8 * scale))  # materialise the lazy layer
        self.optimizer_g = torch.optim.Adam(self.net_g.parameters(), lr=1e-4)
        self.optimizer_d = torch.optim.Adam(self.net_d.parameters(), lr=1e-4)

    def feed_data(self, data):
        self.lq = data['lq']
        self.gt = data['gt']

    def reduce_loss_dict(self, loss_dict):
        return OrderedDict((k, v.mean().item()) for k, v in loss_dict.items())


class ESRGANModel(SRGANModel):
    def optimize_parameters(self, current_iter):
        # optimize net_g
        for p in self.net_d.parameters():
            p.requires_grad = False

        self.optimizer_g.zero_grad()
        self.output = self.net_g(self.lq)

        l_g_total = 0
        loss_dict = OrderedDict()
        if current_iter % self.net_d_iters == 0 and current_iter > self.net_d_init_iters:
            l_g_pix = self.cri_pix(self.output, self.gt)
            l_g_total += l_g_pix
            loss_dict['l_g_pix'] = l_g_pix
            # relativistic gan loss for the generator
            real_d_pred = self.net_d(self.gt).detach()
            fake_g_pred = self.net_d(self.output)
            l_g_real = self.cri_gan(real_d_pred - torch.mean(fake_g_pred), False, is_disc=False)
            l_g_fake = self.cri_gan(fake_g_pred - torch.mean(real_d_pred), True, is_disc=False)
            l_g_gan = (l_g_real + l_g_fake) / 2
            l_g_total += l_g_gan
            loss_dict['l_g_gan'] = l_g_gan

            l_g_total.backward()
            self.optimizer_g.step()

        # optimize net_d
        for p in self.net_d.parameters():
            p.requires_grad = True

        self.optimizer_d.zero_grad()
        # relativistic gan loss for the discriminator
        fake_d_pred = self.net_d(self.output).detach()
        real_d_pred = self.net_d(self.gt)
        l_d_real = self.cri_gan(real_d_pred - torch.mean(fake_d_pred), True, is_disc=True) * 0.5
        l_d_real.backward()
        fake_d_pred = self.net_d(self.output.detach())
        l_d_fake = self.cri_gan(fake_d_pred - torch.mean(real_d_pred.detach()), False, is_disc=True) * 0.5
        l_d_fake.backward()
        self.optimizer_d.step()

        loss_dict['l_d_real'] = l_d_real
        loss_dict['l_d_fake'] = l_d_fake
        loss_dict['out_d_real'] = torch.mean(real_d_pred.detach())
        loss_dict['out_d_fake'] = torch.mean(fake_d_pred.detach())
        self.log_dict = self.reduce_loss_dict(loss_dict)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = ESRGANModel()
    g_w, d_w = model.net_g[0].weight, model.net_d[0].weight
    g_arrivals, d_arrivals = [], []
    g_w.register_hook(lambda g: g_arrivals.append(1))
    d_w.register_hook(lambda g: d_arrivals.append(1))
    g_count_at_d_step = []
    model.optimizer_d.register_step_pre_hook(lambda o, a, kw: g_count_at_d_step.append(len(g_arrivals)))
    g0, d0 = g_w.detach().clone(), d_w.detach().clone()

    iters = 3
    for current_iter in range(1, iters + 1):
        model.feed_data({'lq': torch.rand(2, 3, 8, 8), 'gt': torch.rand(2, 3, 16, 16)})
        model.optimize_parameters(current_iter)

    assert g_count_at_d_step == [1, 2, 3]  # the D update added no gradient pass through net_g
    assert len(d_arrivals) == 2 * iters  # net_d is reached only by its two D losses (frozen in the G step)
    assert not torch.equal(g0, g_w) and not torch.equal(d0, d_w)
    print("evidence holds: the generator step goes through a frozen net_d, the D step through a detached output")
