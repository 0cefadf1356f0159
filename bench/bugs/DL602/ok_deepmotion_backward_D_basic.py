# source: https://github.com/DeepMotionEditing/deep-motion-editing/issues/90
# category: DL602
# expect: clean
# evidence: GAN_model.backward_D_basic feeds each discriminator fake.detach() (fake poses from the ImagePool), so the D update leaves the generators' (auto-encoders') gradients exactly as backward_G left them, while both optimizerG and optimizerD change their weights.
import random
from types import SimpleNamespace
import torch
import torch.nn as nn
from torch import optim


class GAN_loss(nn.Module):
    def __init__(self, gan_mode, real_lable=1.0, fake_lable=0.0):
        super(GAN_loss, self).__init__()
        self.register_buffer('real_label', torch.tensor(real_lable))
        self.register_buffer('fake_label', torch.tensor(fake_lable))
        self.gan_mode = gan_mode
        self.loss = nn.MSELoss() if gan_mode == 'lsgan' else nn.BCEWithLogitsLoss()

    def __call__(self, prediction, target_is_real):
        target = self.real_label if target_is_real else self.fake_label
        return self.loss(prediction, target.expand_as(prediction))


class ImagePool():
    def __init__(self, pool_size):
        self.pool_size = pool_size
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
            elif random.uniform(0, 1) > 0.5:
                random_id = random.randint(0, self.pool_size - 1)
                tmp = self.images[random_id].clone()
                self.images[random_id] = image
                return_images.append(tmp)
            else:
                return_images.append(image)
        return torch.cat(return_images, 0)


class AE(nn.Module):
    def __init__(self, channels, latent):
        super(AE, self).__init__()
        self.enc = nn.Sequential(nn.Conv1d(channels, latent, 3, padding=1), nn.LeakyReLU(0.2))
        self.dec = nn.Conv1d(latent, channels, 3, padding=1)

    def forward(self, motion):
        latent = self.enc(motion)
        return latent, self.dec(latent)


class ForwardKinematics:
    def forward_from_raw(self, raw):
        return torch.cumsum(raw, dim=1)  # joint positions accumulated along the chain


class Discriminator(nn.Module):
    def __init__(self, channels):
        super(Discriminator, self).__init__()
        self.layers = nn.Sequential(nn.Conv1d(channels, 8, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv1d(8, 1, 3, 1, 1))

    def forward(self, x):
        return self.layers(x)


class IntegratedModel:
    def __init__(self, args, channels):
        self.auto_encoder = AE(channels, args.latent)
        self.discriminator = Discriminator(channels)
        self.fk = ForwardKinematics()

    def G_parameters(self):
        return list(self.auto_encoder.parameters())

    def D_parameters(self):
        return list(self.discriminator.parameters())


class LossRecorder:
    def add_scalar(self, name, val):
        pass


class GAN_model:
    def __init__(self, args, character_names):
        self.args = args
        self.character_names = character_names
        self.n_topology = len(character_names)
        self.models, self.D_para, self.G_para = [], [], []
        for i in range(self.n_topology):
            model = IntegratedModel(args, args.channels)
            self.models.append(model)
            self.D_para += model.D_parameters()
            self.G_para += model.G_parameters()
        self.fake_pools = []
        self.optimizerD = optim.Adam(self.D_para, args.learning_rate, betas=(0.9, 0.999))
        self.optimizerG = optim.Adam(self.G_para, args.learning_rate, betas=(0.9, 0.999))
        self.criterion_rec = torch.nn.MSELoss()
        self.criterion_gan = GAN_loss(args.gan_mode)
        self.criterion_cycle = torch.nn.L1Loss()
        for i in range(self.n_topology):
            self.fake_pools.append(ImagePool(args.pool_size))
        self.loss_recoder = LossRecorder()

    def set_input(self, motions):
        self.motions_input = motions

    def discriminator_requires_grad_(self, requires_grad):
        for model in self.models:
            for para in model.discriminator.parameters():
                para.requires_grad = requires_grad

    def forward(self):
        self.latents, self.res, self.pos_ref, self.motions = [], [], [], []
        self.fake_res, self.fake_pos, self.fake_latent = [], [], []
        for i in range(self.n_topology):
            motion = self.motions_input[i]
            self.motions.append(motion)
            latent, res = self.models[i].auto_encoder(motion)
            self.latents.append(latent)
            self.res.append(res)
            self.pos_ref.append(self.models[i].fk.forward_from_raw(motion).detach())
        for src in range(self.n_topology):
            for dst in range(self.n_topology):
                fake_res = self.models[dst].auto_encoder.dec(self.latents[src])
                fake_latent = self.models[dst].auto_encoder.enc(fake_res)
                fake_pos = self.models[dst].fk.forward_from_raw(fake_res)
                self.fake_latent.append(fake_latent)
                self.fake_pos.append(fake_pos)
                self.fake_res.append(fake_res)

    def backward_D_basic(self, netD, real, fake):
        pred_real = netD(real)
        loss_D_real = self.criterion_gan(pred_real, True)
        pred_fake = netD(fake.detach())
        loss_D_fake = self.criterion_gan(pred_fake, False)
        loss_D = (loss_D_real + loss_D_fake) * 0.5
        loss_D.backward()
        return loss_D

    def backward_D(self):
        self.loss_Ds = []
        self.loss_D = 0
        for i in range(self.n_topology):
            fake = self.fake_pools[i].query(self.fake_pos[2 - i])
            self.loss_Ds.append(self.backward_D_basic(self.models[i].discriminator, self.pos_ref[i].detach(), fake))
            self.loss_D += self.loss_Ds[-1]
            self.loss_recoder.add_scalar('D_loss_{}'.format(i), self.loss_Ds[-1])

    def backward_G(self):
        self.rec_loss = 0
        self.cycle_loss = 0
        self.loss_G = 0
        for i in range(self.n_topology):
            self.rec_loss += self.criterion_rec(self.motions[i], self.res[i])
        p = 0
        for src in range(self.n_topology):
            for dst in range(self.n_topology):
                self.cycle_loss += self.criterion_cycle(self.latents[src], self.fake_latent[p])
                if src != dst:
                    self.loss_G += self.criterion_gan(self.models[dst].discriminator(self.fake_pos[p]), True)
                p += 1
        self.loss_G_total = self.rec_loss * self.args.lambda_rec + self.cycle_loss * self.args.lambda_cycle / 2 + self.loss_G * 1
        self.loss_G_total.backward()

    def optimize_parameters(self):
        self.forward()
        # update Gs
        self.discriminator_requires_grad_(False)
        self.optimizerG.zero_grad()
        self.backward_G()
        self.optimizerG.step()
        # update Ds
        if self.args.gan_mode != 'none':
            self.discriminator_requires_grad_(True)
            self.optimizerD.zero_grad()
            self.backward_D()
            self.optimizerD.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    random.seed(0)
    args = SimpleNamespace(channels=6, latent=8, learning_rate=2e-4, gan_mode='lsgan', pool_size=2,
                           lambda_rec=5, lambda_cycle=2.5)
    model = GAN_model(args, [['Aj'], ['BigVegas']])
    G0 = [p.detach().clone() for p in model.G_para]
    D0 = [p.detach().clone() for p in model.D_para]
    unchanged = []
    backward_D_basic = model.backward_D_basic

    def recording_backward_D_basic(netD, real, fake):
        before = [p.grad.detach().clone() for p in model.G_para]
        loss_D = backward_D_basic(netD, real, fake)
        with torch.no_grad():
            unchanged.append(all(torch.equal(p.grad, b) for p, b in zip(model.G_para, before)))
        return loss_D

    model.backward_D_basic = recording_backward_D_basic
    for epoch in range(3):
        model.set_input([torch.randn(2, args.channels, 16), torch.randn(2, args.channels, 16)])
        model.optimize_parameters()
    assert unchanged == [True] * 6, unchanged
    assert all(p.grad is not None for p in model.D_para)
    with torch.no_grad():
        assert any(not torch.equal(p, q) for p, q in zip(model.G_para, G0))
        assert any(not torch.equal(p, q) for p, q in zip(model.D_para, D0))
    print("evidence holds: D updates never changed generator gradients; generators and discriminators both trained")
