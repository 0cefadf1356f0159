# source: https://github.com/wangle53/CSA-CDGAN/issues/5
# category: DL202
# expect: flag 72, 73
# evidence: err_d_fake has no grad_fn; netg after training is identical with D_WEIGHT 1 and D_WEIGHT 0
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch import nn


class ct:
    ISIZE = 8
    NC = 3
    GT_C = 1
    BATCH_SIZE = 4
    EPOCH = 3
    LR = 2e-3
    G_WEIGHT = 1.0
    D_WEIGHT = 1.0


class NetG(nn.Module):
    """Change-map generator: two stacked images in, one change map out."""

    def __init__(self, nc_in, nc_out):
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(nc_in, 8, 3, padding=1), nn.LeakyReLU(0.2))
        self.decoder = nn.Sequential(nn.Conv2d(8, nc_out, 3, padding=1), nn.Sigmoid())

    def forward(self, x):
        return self.decoder(self.encoder(x))


class NetD(nn.Module):
    def __init__(self, nc_in):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(nc_in, 4, 3, stride=2, padding=1), nn.LeakyReLU(0.2))
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(4 * 4 * 4, 1), nn.Sigmoid())

    def forward(self, x):
        return self.classifier(self.features(x)).view(-1)


def weights_init(m):
    if isinstance(m, nn.Conv2d):
        nn.init.normal_(m.weight, 0.0, 0.02)


def train_network(train_dataloader, netg, netd):
    l_con = nn.L1Loss()
    l_bce = nn.BCELoss()
    optimizer_d = optim.Adam(netd.parameters(), lr=ct.LR, betas=(0.5, 0.999))
    optimizer_g = optim.Adam(netg.parameters(), lr=ct.LR, betas=(0.5, 0.999))
    err_d_fake = None
    for epoch in range(1, ct.EPOCH):
        loss_g = []
        loss_d = []
        netg.train()
        netd.train()
        for i, data in enumerate(train_dataloader):
            x1, x2, gt = data
            gt = gt[:, 0, :, :].unsqueeze(1)
            x = torch.cat((x1, x2), 1)
            real_label = torch.ones(size=(x1.shape[0],), dtype=torch.float32)
            fake_label = torch.zeros(size=(x1.shape[0],), dtype=torch.float32)

            fake = netg(x)
            pred_real = netd(gt)
            pred_fake = netd(fake).detach()
            err_d_fake = l_bce(pred_fake, fake_label)
            err_g = l_con(fake, gt)
            err_g_total = ct.G_WEIGHT * err_g + ct.D_WEIGHT * err_d_fake

            pred_fake_ = netd(fake.detach())
            err_d_real = l_bce(pred_real, real_label)
            err_d_fake_ = l_bce(pred_fake_, fake_label)
            err_d_total = (err_d_real + err_d_fake_) * 0.5

            optimizer_g.zero_grad()
            err_g_total.backward(retain_graph=True)
            optimizer_g.step()
            optimizer_d.zero_grad()
            err_d_total.backward()
            optimizer_d.step()

            loss_g.append(err_g_total.item())
            loss_d.append(err_d_total.item())
        print('epoch:', epoch, ' G|D loss is {:.4f}|{:.4f}'.format(np.mean(loss_g), np.mean(loss_d)))
    return err_d_fake


def make_loader(n_batches=3):
    loader = []
    for _ in range(n_batches):
        x1 = torch.rand(ct.BATCH_SIZE, ct.NC, ct.ISIZE, ct.ISIZE)
        x2 = torch.rand(ct.BATCH_SIZE, ct.NC, ct.ISIZE, ct.ISIZE)
        gt = (torch.rand(ct.BATCH_SIZE, 3, ct.ISIZE, ct.ISIZE) > 0.5).float()
        loader.append((x1, x2, gt))
    return loader


if __name__ == "__main__":
    torch.manual_seed(0)
    netg0 = NetG(ct.NC * 2, ct.GT_C)
    netd0 = NetD(ct.GT_C)
    netg0.apply(weights_init)
    netd0.apply(weights_init)
    loader = make_loader()

    trained = {}
    for d_weight in (1.0, 0.0):
        ct.D_WEIGHT = d_weight
        netg, netd = copy.deepcopy(netg0), copy.deepcopy(netd0)
        err_d_fake = train_network(loader, netg, netd)
        trained[d_weight] = netg
        assert err_d_fake.grad_fn is None

    for p_with, p_without in zip(trained[1.0].parameters(), trained[0.0].parameters()):
        assert torch.equal(p_with, p_without)
    print("evidence holds: the adversarial term of the generator loss is detached; netg trains identically without it")
