# source: https://github.com/TencentYoutuResearch/Adv-Makeup/issues/25
# category: DL602
# expect: flag 87, 96
# evidence: update_discr feeds the generator output fake_after to the discriminator without detach() and calls loss_D.backward(), so the discriminator step writes gradients into the encoder/decoder (generator) parameters.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Encoder(nn.Module):
    def __init__(self, input_dim):
        super().__init__()
        self.conv = nn.Conv2d(input_dim, 8, 3, 1, 1)

    def forward(self, x):
        return (F.relu(self.conv(x)),)


class Decoder(nn.Module):
    def __init__(self, input_dim):
        super().__init__()
        self.conv = nn.Conv2d(8, input_dim, 3, 1, 1)

    def forward(self, content):
        return torch.tanh(self.conv(content))


class Discriminator(nn.Module):
    def __init__(self, input_dim):
        super().__init__()
        self.model = nn.Sequential(nn.Conv2d(input_dim, 8, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 4, 2, 1))

    def forward(self, x):
        return self.model(x)


class Config:
    lr = 0.001
    gpu = -1
    input_dim = 3


# *************************
# Main module of Adv-Makeup (training-relevant parts)
# *************************
class MakeupAttack(nn.Module):
    def __init__(self, config):
        super(MakeupAttack, self).__init__()

        self.config = config
        self.lr = config.lr
        self.lr_discr = self.lr / 2.5
        self.device = torch.device('cuda:{}'.format(config.gpu)) if config.gpu >= 0 else torch.device('cpu')

        # Discriminator
        self.discr = Discriminator(config.input_dim).to(self.device)
        # Encoder
        self.enc = Encoder(config.input_dim).to(self.device)
        # Decoder
        self.dec = Decoder(config.input_dim).to(self.device)

        # Optmizers for discriminator
        self.discr_opt = torch.optim.Adam(self.discr.parameters(),
                                          lr=self.lr_discr, betas=(0.5, 0.999), weight_decay=0.0001)
        # Optmizers for generator
        self.gen_opt = torch.optim.Adam(list(self.enc.parameters()) + list(self.dec.parameters()),
                                        lr=self.lr, betas=(0.5, 0.999), weight_decay=0.0001)
        self.criterionL1 = nn.L1Loss()

    def res_init(self, ep):
        # Cumulative Losses
        self.disp_ad_true_loss = 0
        self.disp_ad_fake_loss = 0
        self.disp_g_loss = 0

    def update_discr(self, before, after):
        """
        :param before: Un-makeup eye area images (attacker's)
        :param after: Real-world makeup eye area images
        :return: None
        """
        self.discr_opt.zero_grad()
        fake_content = self.enc(before)
        fake_after = self.dec(*fake_content)
        pred_fake = self.discr(fake_after.to(self.device))
        pred_real = self.discr(after.to(self.device))

        out_fake = torch.sigmoid(pred_fake)
        out_real = torch.sigmoid(pred_real)
        ad_true_loss = F.mse_loss(out_real, torch.ones_like(out_real, device=self.device))
        ad_fake_loss = F.mse_loss(out_fake, torch.zeros_like(out_fake, device=self.device))

        loss_D = ad_true_loss + ad_fake_loss
        loss_D.backward(retain_graph=True)
        nn.utils.clip_grad_norm_(self.discr.parameters(), 5)
        self.discr_opt.step()

        self.disp_ad_true_loss += ad_true_loss.item()
        self.disp_ad_fake_loss += ad_fake_loss.item()

        self.orig_before = before
        self.orig_after = after
        self.gen_img = fake_after

    def update_gen(self, before):
        self.gen_opt.zero_grad()

        fake_content = self.enc(before)
        fake_after = self.dec(*fake_content)
        fake_pred = self.discr(fake_after.to(self.device))
        fake_out = torch.sigmoid(fake_pred)

        '''discr loss'''
        discr_loss = F.mse_loss(fake_out, torch.ones_like(fake_out, device=self.device))
        '''tv loss'''
        tv_loss = (torch.mean(torch.abs(fake_after[:, :, :, :-1] - fake_after[:, :, :, 1:])) +
                   torch.mean(torch.abs(fake_after[:, :, :-1, :] - fake_after[:, :, 1:, :])))

        loss_G = discr_loss + tv_loss
        loss_G.backward(retain_graph=True)
        nn.utils.clip_grad_norm_(self.discr.parameters(), 5)
        self.gen_opt.step()

        self.disp_g_loss += loss_G.item()
        self.gen_img = fake_after


if __name__ == "__main__":
    model = MakeupAttack(Config())
    model.res_init(0)
    before = torch.rand(4, 3, 16, 16) * 2 - 1
    after = torch.rand(4, 3, 16, 16) * 2 - 1

    model.gen_opt.zero_grad(set_to_none=True)
    model.update_discr(before, after)
    gen_grads = [p.grad for p in list(model.enc.parameters()) + list(model.dec.parameters())]
    assert all(g is not None for g in gen_grads)
    total = sum(g.abs().sum().item() for g in gen_grads)
    assert total > 0
    model.update_gen(before)
    print("evidence holds: the discriminator step left non-zero gradients (L1 = %.4f) on the generator" % total)
