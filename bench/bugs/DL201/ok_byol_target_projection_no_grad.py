# source: https://github.com/lucidrains/byol-pytorch/blob/master/byol_pytorch/byol_pytorch.py
# category: DL201
# expect: clean
# evidence: in both modes the online encoder and predictor get gradients; with use_momentum=True the target copy is frozen and only moves by the moving average
import copy

import torch
from torch import nn
import torch.nn.functional as F


def loss_fn(x, y):
    x = F.normalize(x, dim=-1, p=2)
    y = F.normalize(y, dim=-1, p=2)
    return 2 - 2 * (x * y).sum(dim=-1)


def set_requires_grad(model, val):
    for p in model.parameters():
        p.requires_grad = val


class EMA:
    def __init__(self, beta):
        self.beta = beta

    def update_average(self, old, new):
        return old * self.beta + (1 - self.beta) * new


@torch.no_grad()
def update_moving_average(ema_updater, ma_model, current_model):
    for current_params, ma_params in zip(current_model.parameters(), ma_model.parameters()):
        ma_params.copy_(ema_updater.update_average(ma_params, current_params))


class NetWrapper(nn.Module):
    def __init__(self, net, projection_size=8, layer="body"):
        super().__init__()
        self.net = net
        self.hidden = None
        getattr(net, layer).register_forward_hook(self._hook)
        self.projector = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, projection_size))

    def _hook(self, _, input, output):
        self.hidden = output.flatten(1)

    def forward(self, x):
        self.net(x)
        representation = self.hidden
        self.hidden = None
        return self.projector(representation), representation


class SmallNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        return self.fc(self.body(x).flatten(1))


class BYOL(nn.Module):
    def __init__(self, net, projection_size=8, moving_average_decay=0.9, use_momentum=True):
        super().__init__()
        self.net = net
        self.online_encoder = NetWrapper(net, projection_size)
        self.use_momentum = use_momentum
        self.target_encoder = None
        self.target_ema_updater = EMA(moving_average_decay)
        self.online_predictor = nn.Sequential(nn.Linear(projection_size, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, projection_size))

    def _get_target_encoder(self):
        if self.target_encoder is None:
            self.target_encoder = copy.deepcopy(self.online_encoder)
            set_requires_grad(self.target_encoder, False)
        return self.target_encoder

    def update_moving_average(self):
        assert self.use_momentum
        update_moving_average(self.target_ema_updater, self.target_encoder, self.online_encoder)

    def forward(self, image_one, image_two):
        online_proj_one, _ = self.online_encoder(image_one)
        online_proj_two, _ = self.online_encoder(image_two)
        online_pred_one = self.online_predictor(online_proj_one)
        online_pred_two = self.online_predictor(online_proj_two)

        with torch.no_grad():
            target_encoder = self._get_target_encoder() if self.use_momentum else self.online_encoder
            target_proj_one, _ = target_encoder(image_one)
            target_proj_two, _ = target_encoder(image_two)
            target_proj_one.detach_()
            target_proj_two.detach_()

        loss_one = loss_fn(online_pred_one, target_proj_two.detach())
        loss_two = loss_fn(online_pred_two, target_proj_one.detach())
        return (loss_one + loss_two).mean()


def train(learner, opt, images, steps=2):
    for _ in range(steps):
        loss = learner(images + 0.1 * torch.randn_like(images), images.flip(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if learner.use_momentum:
            learner.update_moving_average()


if __name__ == "__main__":
    torch.manual_seed(0)
    images = torch.randn(6, 3, 8, 8)
    for use_momentum in (False, True):
        learner = BYOL(SmallNet(), use_momentum=use_momentum)
        opt = torch.optim.Adam(learner.parameters(), lr=3e-4)
        conv = learner.net.body[0].weight
        before = conv.detach().clone()
        train(learner, opt, images)
        assert conv.grad is not None and not torch.equal(before, conv)
        assert all(p.grad is not None for p in learner.online_predictor.parameters())
        if use_momentum:
            assert all(p.grad is None for p in learner.target_encoder.parameters())
    print("evidence holds: the target branch carries no gradient by design; the online encoder trains in both modes")
