# source: https://github.com/IsHYuhi/ST-CGAN_Stacked_Conditional_Generative_Adversarial_Networks/issues/17
# category: DL202
# expect: flag 146, 152
# evidence: two train_model runs that differ only in the discriminators' random init end with bit-identical G1/G2 weights, so the adversarial terms G_L_CGAN1/G_L_CGAN2 (computed on fake1.detach()/fake2.detach()) never reach the generators.
"""ST-CGAN train.py (train_model) with the Cvi/CvTi generator and discriminator shrunk to two levels."""
import argparse

import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable
from torch.utils.data import DataLoader, TensorDataset


class Cvi(nn.Module):
    def __init__(self, in_channels, out_channels, before=None, after=False, kernel_size=4, stride=2,
                 padding=1, bias=False):
        super(Cvi, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride, padding, bias=bias)
        nn.init.normal_(self.conv.weight, 0.0, 0.02)
        if after == 'BN':
            self.after = nn.BatchNorm2d(out_channels)
        elif after == 'sigmoid':
            self.after = torch.sigmoid
        if before == 'LReLU':
            self.before = nn.LeakyReLU(negative_slope=0.2)

    def forward(self, x):
        if hasattr(self, 'before'):
            x = self.before(x)
        x = self.conv(x)
        if hasattr(self, 'after'):
            x = self.after(x)
        return x


class CvTi(nn.Module):
    def __init__(self, in_channels, out_channels, before=None, after=False, kernel_size=4, stride=2,
                 padding=1, bias=False):
        super(CvTi, self).__init__()
        self.conv = nn.ConvTranspose2d(in_channels, out_channels, kernel_size, stride, padding, bias=bias)
        nn.init.normal_(self.conv.weight, 0.0, 0.02)
        if after == 'BN':
            self.after = nn.BatchNorm2d(out_channels)
        elif after == 'Tanh':
            self.after = torch.tanh
        if before == 'ReLU':
            self.before = nn.ReLU()

    def forward(self, x):
        if hasattr(self, 'before'):
            x = self.before(x)
        x = self.conv(x)
        if hasattr(self, 'after'):
            x = self.after(x)
        return x


class Generator(nn.Module):
    def __init__(self, input_channels=3, output_channels=1):
        super(Generator, self).__init__()
        self.Cv0 = Cvi(input_channels, 8)
        self.Cv1 = Cvi(8, 16, before='LReLU', after='BN')
        self.CvT2 = CvTi(16, 8, before='ReLU', after='BN')
        self.CvT3 = CvTi(16, output_channels, before='ReLU', after='Tanh')

    def forward(self, input):
        x0 = self.Cv0(input)
        x1 = self.Cv1(x0)
        x2 = self.CvT2(x1)
        out = self.CvT3(torch.cat([x2, x0], dim=1))
        return out


class Discriminator(nn.Module):
    def __init__(self, input_channels=4):
        super(Discriminator, self).__init__()
        self.Cv0 = Cvi(input_channels, 8)
        self.Cv1 = Cvi(8, 16, before='LReLU', after='BN')
        self.Cv2 = Cvi(16, 1, before='LReLU', after='sigmoid')

    def forward(self, input):
        return self.Cv2(self.Cv1(self.Cv0(input)))


def set_requires_grad(nets, requires_grad=False):
    for net in nets:
        if net is not None:
            for param in net.parameters():
                param.requires_grad = requires_grad


def train_model(G1, G2, D1, D2, dataloader, val_dataset, num_epochs, parser, save_model_name='model'):
    device = "cpu"
    Tensor = torch.FloatTensor
    lr = parser.lr
    beta1, beta2 = 0.5, 0.999
    optimizerG = torch.optim.Adam([{'params': G1.parameters()}, {'params': G2.parameters()}],
                                  lr=lr, betas=(beta1, beta2))
    optimizerD = torch.optim.Adam([{'params': D1.parameters()}, {'params': D2.parameters()}],
                                  lr=lr, betas=(beta1, beta2))
    criterionGAN = nn.BCEWithLogitsLoss().to(device)
    criterionL1 = nn.L1Loss().to(device)
    lambda_dict = {'lambda1': 5, 'lambda2': 0.1, 'lambda3': 0.1}
    g_losses, d_losses = [], []

    for epoch in range(num_epochs + 1):
        G1.train(); G2.train(); D1.train(); D2.train()
        epoch_g_loss = 0.0
        epoch_d_loss = 0.0
        for images, gt_shadow, gt in dataloader:
            if images.size()[0] == 1:
                continue
            images, gt, gt_shadow = images.to(device), gt.to(device), gt_shadow.to(device)

            # Train Discriminator
            set_requires_grad([D1, D2], True)
            optimizerD.zero_grad()
            detected_shadow = G1(images)
            fake1 = torch.cat([images, detected_shadow], dim=1)
            real1 = torch.cat([images, gt_shadow], dim=1)
            out_D1_fake = D1(fake1.detach())
            out_D1_real = D1(real1)
            shadow_removal_image = G2(fake1)
            fake2 = torch.cat([fake1, shadow_removal_image], dim=1)
            real2 = torch.cat([real1, gt], dim=1)
            out_D2_fake = D2(fake2.detach())
            out_D2_real = D2(real2)
            # L_CGAN1
            label_D1_fake = Variable(Tensor(np.zeros(out_D1_fake.size())), requires_grad=True)
            label_D1_real = Variable(Tensor(np.ones(out_D1_fake.size())), requires_grad=True)
            D_L_CGAN1 = criterionGAN(out_D1_fake, label_D1_fake) + criterionGAN(out_D1_real, label_D1_real)
            # L_CGAN2
            label_D2_fake = Variable(Tensor(np.zeros(out_D2_fake.size())), requires_grad=True)
            label_D2_real = Variable(Tensor(np.ones(out_D2_fake.size())), requires_grad=True)
            D_L_CGAN2 = criterionGAN(out_D2_fake, label_D2_fake) + criterionGAN(out_D2_real, label_D2_real)
            D_loss = lambda_dict['lambda2'] * D_L_CGAN1 + lambda_dict['lambda3'] * D_L_CGAN2
            D_loss.backward()
            optimizerD.step()

            # Train Generator
            set_requires_grad([D1, D2], False)
            optimizerG.zero_grad()
            # L_CGAN1
            fake1 = torch.cat([images, detected_shadow], dim=1)
            out_D1_fake = D1(fake1.detach())
            G_L_CGAN1 = criterionGAN(out_D1_fake, label_D1_real)
            # L_data1
            G_L_data1 = criterionL1(detected_shadow, gt_shadow)
            # L_CGAN2
            fake2 = torch.cat([fake1, shadow_removal_image], dim=1)
            out_D2_fake = D2(fake2.detach())
            G_L_CGAN2 = criterionGAN(out_D2_fake, label_D2_real)
            # L_data2
            G_L_data2 = criterionL1(gt, shadow_removal_image)
            # total
            G_loss = G_L_data1 + lambda_dict['lambda1'] * G_L_data2 + lambda_dict['lambda2'] * G_L_CGAN1 \
                + lambda_dict['lambda3'] * G_L_CGAN2
            G_loss.backward()
            optimizerG.step()
            epoch_d_loss += D_loss.item()
            epoch_g_loss += G_loss.item()
        d_losses += [epoch_d_loss]
        g_losses += [epoch_g_loss]
    return G1, G2, D1, D2


def run(d_seed, dataloader, parser):
    torch.manual_seed(0)
    G1 = Generator(input_channels=3, output_channels=1)
    G2 = Generator(input_channels=4, output_channels=3)
    torch.manual_seed(d_seed)
    D1 = Discriminator(input_channels=4)
    D2 = Discriminator(input_channels=7)
    return train_model(G1, G2, D1, D2, dataloader, None, num_epochs=1, parser=parser)


if __name__ == "__main__":
    torch.manual_seed(0)
    parser = argparse.Namespace(lr=2e-4, batch_size=2)
    images = torch.rand(4, 3, 16, 16) * 2 - 1
    gt_shadow = (torch.rand(4, 1, 16, 16) > 0.5).float() * 2 - 1
    gt = torch.rand(4, 3, 16, 16) * 2 - 1
    dataloader = DataLoader(TensorDataset(images, gt_shadow, gt), batch_size=parser.batch_size, shuffle=False)

    G1a, G2a, D1a, _ = run(1, dataloader, parser)
    G1b, G2b, D1b, _ = run(2, dataloader, parser)
    with torch.no_grad():
        assert any(not torch.equal(a, b) for a, b in zip(D1a.parameters(), D1b.parameters()))
        assert all(torch.equal(a, b) for a, b in zip(G1a.parameters(), G1b.parameters()))
        assert all(torch.equal(a, b) for a, b in zip(G2a.parameters(), G2b.parameters()))
    print("evidence holds: generators end identical whatever the discriminators are; the GAN terms give them no gradient")
