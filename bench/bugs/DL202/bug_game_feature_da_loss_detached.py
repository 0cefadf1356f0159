# source: https://github.com/jason718/game-feature-learning/issues/3
# category: DL202
# expect: flag 143, 144
# evidence: in backward_BH the domain-adaptation loss loss_DA is computed from a detached feature, so loss_DA.requires_grad is False and netB's gradients are exactly the same as with DA_WEIGHT = 0.
import numpy as np
import torch
import torch.nn as nn
import random


#  networks.py (alexnet heads shrunk)
class GANLoss(nn.Module):
    def __init__(self, use_lsgan=False, target_real_label=1.0, target_fake_label=0.0):
        super(GANLoss, self).__init__()
        self.register_buffer('real_label', torch.tensor(target_real_label))
        self.register_buffer('fake_label', torch.tensor(target_fake_label))
        self.loss = nn.MSELoss() if use_lsgan else nn.BCELoss()

    def get_target_tensor(self, input, target_is_real):
        target_tensor = self.real_label if target_is_real else self.fake_label
        return target_tensor.expand_as(input)

    def __call__(self, input, target_is_real):
        target_tensor = self.get_target_tensor(input, target_is_real)
        return self.loss(input, target_tensor)


class netB_alexnet(nn.Module):
    def __init__(self):
        super(netB_alexnet, self).__init__()
        self.conv1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(inplace=True))
        self.conv5 = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU(inplace=True))

    def forward(self, x):
        feat1 = self.conv1(x)
        feat5 = self.conv5(feat1)
        return {'conv1': feat1, 'conv5': feat5, 'out': feat5}


class netH_alexnet(nn.Module):
    def __init__(self):
        super(netH_alexnet, self).__init__()
        self.depth = nn.Conv2d(8, 1, 1)
        self.edge = nn.Conv2d(8, 1, 1)
        self.normal = nn.Conv2d(8, 3, 1)

    def forward(self, x):
        return {'depth': self.depth(x), 'edge': self.edge(x), 'norm': self.normal(x)}


class netD_alexnet(nn.Module):
    def __init__(self, layer='conv5'):
        super(netD_alexnet, self).__init__()
        self.main = nn.Sequential(nn.Conv2d(8, 4, 3, stride=2, padding=1), nn.LeakyReLU(0.2),
                                  nn.AdaptiveAvgPool2d(1), nn.Conv2d(4, 1, 1), nn.Sigmoid())

    def forward(self, x):
        output = self.main(x)
        return output.view(-1, 1).squeeze(1)


class ImagePool():
    def __init__(self, pool_size):
        self.pool_size = pool_size
        self.images = []

    def query(self, images):
        if self.pool_size == 0:
            return images
        if len(self.images) < self.pool_size:
            self.images.append(images.clone())
            return images
        if random.uniform(0, 1) > 0.5:
            random_id = random.randint(0, self.pool_size - 1)
            tmp = self.images[random_id].clone()
            self.images[random_id] = images.clone()
            return tmp
        return images


class Model():
    def initialize(self, cfg):
        self.cfg = cfg
        self.device = torch.device('cpu')
        self.netB = netB_alexnet()
        self.netH = netH_alexnet()
        if self.cfg['USE_DA'] and self.cfg['TRAIN']:
            self.netD = netD_alexnet(self.cfg['DA_LAYER'])
        self.total_steps = 0
        self.criterionGAN = GANLoss().to(self.device)
        self.criterionDepth1 = torch.nn.MSELoss().to(self.device)
        self.criterionNorm = torch.nn.CosineEmbeddingLoss().to(self.device)
        self.criterionEdge = None
        self.optimizer_B = torch.optim.Adam(self.netB.parameters(), lr=cfg['LR'], betas=(cfg['BETA1'], cfg['BETA2']))
        self.optimizer_H = torch.optim.Adam(self.netH.parameters(), lr=cfg['LR'], betas=(cfg['BETA1'], cfg['BETA2']))
        if cfg['USE_DA']:
            self.real_pool = ImagePool(cfg['POOL_SIZE'])
            self.syn_pool = ImagePool(cfg['POOL_SIZE'])
            self.optimizer_D = torch.optim.SGD(self.netD.parameters(), lr=cfg['LR'], momentum=cfg['MOMENTUM'],
                                               weight_decay=cfg['WEIGHT_DECAY'])

    def set_input(self, inputs):
        self.input_syn_color = inputs['syn']['color'].to(self.device)
        self.input_syn_dep = inputs['syn']['depth'].to(self.device)
        self.input_syn_edge = inputs['syn']['edge'].to(self.device)
        self.input_syn_edge_count = inputs['syn']['edge_pix'].to(self.device)
        self.input_syn_norm = inputs['syn']['normal'].to(self.device)
        if self.cfg['USE_DA']:
            self.input_real_color = inputs['real'][0].to(self.device)

    def forward(self):
        self.feat_syn = self.netB(self.input_syn_color)
        self.head_pred = self.netH(self.feat_syn['out'])
        if self.cfg['USE_DA'] and self.cfg['TRAIN']:
            self.feat_real = self.netB(self.input_real_color)
            self.pred_D_real = self.netD(self.feat_real[self.cfg['DA_LAYER']])
            self.pred_D_syn = self.netD(self.feat_syn[self.cfg['DA_LAYER']])

    def backward_BH(self):
        self.task_pred = self.netH(self.feat_syn['out'])
        # depth
        depth_diff = self.task_pred['depth'] - self.input_syn_dep
        _n = self.task_pred['depth'].size(0) * self.task_pred['depth'].size(2) * self.task_pred['depth'].size(3)
        loss_depth2 = depth_diff.sum().div_(_n).pow(2).mul_(0.5)
        loss_depth1 = self.criterionDepth1(self.task_pred['depth'], self.input_syn_dep)
        self.loss_dep = self.cfg['DEP_WEIGHT'] * (loss_depth1 + loss_depth2) * 0.5
        # surface normal
        ch = self.task_pred['norm'].size(1)
        _pred = self.task_pred['norm'].permute(0, 2, 3, 1).contiguous().view(-1, ch)
        _gt = self.input_syn_norm.permute(0, 2, 3, 1).contiguous().view(-1, ch)
        _gt = (_gt / 127.5) - 1
        _pred = torch.nn.functional.normalize(_pred, dim=1)
        cos_label = torch.ones(_gt.size(0)).to(self.device)
        self.loss_norm = self.cfg['NORM_WEIGHT'] * self.criterionNorm(_pred, _gt, cos_label)
        # edge
        weight_e = (self.task_pred['edge'].size(2) * self.task_pred['edge'].size(3) - self.input_syn_edge_count) \
            / self.input_syn_edge_count
        self.criterionEdge = torch.nn.BCEWithLogitsLoss(weight=weight_e.float().view(-1, 1, 1, 1)).to(self.device)
        self.loss_edge = self.cfg['EDGE_WEIGHT'] * self.criterionEdge(self.task_pred['edge'], self.input_syn_edge)
        ## combined loss
        loss = self.loss_edge + self.loss_norm + self.loss_dep
        if self.cfg['USE_DA']:
            pred_syn = self.netD(self.feat_syn[self.cfg['DA_LAYER']].detach())
            self.loss_DA = self.criterionGAN(pred_syn, True)
            loss += self.loss_DA * self.cfg['DA_WEIGHT']
        loss.backward()

    def backward_D(self):
        # stop backprop to netB by detaching
        _feat_s = self.syn_pool.query(self.feat_syn[self.cfg['DA_LAYER']].detach().cpu())
        pred_syn = self.netD(_feat_s.to(self.device))
        self.loss_D_syn = self.criterionGAN(pred_syn, False)
        _feat_r = self.real_pool.query(self.feat_real[self.cfg['DA_LAYER']].detach().cpu())
        pred_real = self.netD(_feat_r.to(self.device))
        self.loss_D_real = self.criterionGAN(pred_real, True)
        self.loss_D = (self.loss_D_syn + self.loss_D_real) * 0.5
        self.loss_D.backward()

    def optimize(self):
        self.total_steps += 1
        self.forward()
        if self.cfg['USE_DA']:
            self.set_requires_grad(self.netD, True)
            self.set_requires_grad([self.netB, self.netH], False)
            self.optimizer_D.zero_grad()
            self.backward_D()
            self.optimizer_D.step()
        # update on synthetic data
        self.set_requires_grad([self.netB, self.netH], True)
        self.set_requires_grad(self.netD, False)
        self.optimizer_B.zero_grad()
        self.optimizer_H.zero_grad()
        self.backward_BH()
        self.grad_B = [p.grad.clone() for p in self.netB.parameters()]
        self.optimizer_B.step()
        self.optimizer_H.step()

    def set_requires_grad(self, nets, requires_grad=False):
        if not isinstance(nets, list):
            nets = [nets]
        for net in nets:
            if net is not None:
                for param in net.parameters():
                    param.requires_grad = requires_grad


def make_inputs():
    return {'syn': {'color': torch.randn(2, 3, 8, 8), 'depth': torch.rand(2, 1, 8, 8),
                    'edge': (torch.rand(2, 1, 8, 8) > 0.8).float(), 'edge_pix': torch.tensor([13.0, 11.0]),
                    'normal': torch.rand(2, 3, 8, 8) * 255},
            'real': [torch.randn(2, 3, 8, 8)]}


if __name__ == "__main__":
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)
    cfg = {'USE_DA': True, 'TRAIN': True, 'DA_LAYER': 'conv5', 'LR': 1e-3, 'BETA1': 0.5, 'BETA2': 0.999,
           'MOMENTUM': 0.9, 'WEIGHT_DECAY': 5e-4, 'POOL_SIZE': 4, 'DEP_WEIGHT': 1.0, 'NORM_WEIGHT': 1.0,
           'EDGE_WEIGHT': 0.1, 'DA_WEIGHT': 10.0}
    model = Model()
    model.initialize(cfg)
    for step in range(3):
        model.set_input(make_inputs())
        model.optimize()
    assert not model.loss_DA.requires_grad and model.loss_DA.item() > 0

    # same state, same batch: netB gradient with the DA term vs. with DA_WEIGHT = 0
    model.set_input(make_inputs())
    model.forward()
    model.set_requires_grad(model.netD, False)
    grads = []
    for weight in (cfg['DA_WEIGHT'], 0.0):
        model.cfg['DA_WEIGHT'] = weight
        model.optimizer_B.zero_grad()
        model.optimizer_H.zero_grad()
        model.backward_BH()
        grads.append([p.grad.clone() for p in model.netB.parameters()])
        model.forward()
    assert all(torch.equal(a, b) for a, b in zip(grads[0], grads[1]))
    print("evidence holds: loss_DA = %.3f carries no grad; netB gradients identical with and without it"
          % model.loss_DA.item())
