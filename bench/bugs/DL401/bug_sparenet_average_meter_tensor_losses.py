# source: https://github.com/microsoft/SpareNet/issues/12
# category: DL401
# expect: flag 26, 100
# evidence: train_step hands the loss tensors to the AverageMeter, whose running sums then carry grad_fns and graphs that grow with every training step; the validation meter (fed .item()) holds plain floats
from types import SimpleNamespace

import torch
import torch.nn as nn


class AverageMeter(object):
    def __init__(self, items=None):
        self.items = items
        self.n_items = 1 if items is None else len(items)
        self.reset()

    def reset(self):
        self._val = [0] * self.n_items
        self._sum = [0] * self.n_items
        self._count = [0] * self.n_items

    def update(self, values):
        if type(values).__name__ == 'list':
            for idx, v in enumerate(values):
                self._val[idx] = v
                self._sum[idx] += v
                self._count[idx] += 1
        else:
            self._val[0] = values
            self._sum[0] += values
            self._count[0] += 1

    def avg(self, idx=None):
        if idx is None:
            return [self._sum[i] / self._count[i] for i in range(self.n_items)]
        return self._sum[idx] / self._count[idx]


def chamfer_distance_mean(pred, gt):
    d = torch.cdist(pred, gt)
    return d.min(2)[0].mean(1) + d.min(1)[0].mean(1)


class SpareNet(nn.Module):
    def __init__(self, n_points=16):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(3, 32), nn.ReLU())
        self.coarse = nn.Linear(32, n_points * 3)
        self.refine = nn.Linear(3, 3)
        self.n_points = n_points

    def forward(self, data):
        feat = self.encoder(data["partial_cloud"]).max(1)[0]
        coarse = self.coarse(feat).view(-1, self.n_points, 3)
        middle = coarse + 0.1 * torch.tanh(self.refine(coarse))
        refine = middle + 0.1 * torch.tanh(self.refine(middle))
        expansion_penalty = (refine[:, 1:] - refine[:, :-1]).pow(2).sum(-1)
        return coarse, middle, refine, expansion_penalty


class BaseRunner:
    def __init__(self, config):
        self.config = config
        self.models = SpareNet()
        self.optimizers = torch.optim.Adam(self.models.parameters(), lr=config.lr)
        self.loss = {}

    def train(self, train_loader, val_loader):
        epoch_logs = []
        for epoch_idx in range(self.config.n_epochs):
            self.losses.reset()
            self.models.train()
            for batch_idx, items in enumerate(train_loader):
                self.train_step(items)
            self.test_losses.reset()
            self.models.eval()
            with torch.no_grad():
                for batch_idx, items in enumerate(val_loader):
                    self.val_step(items)
            epoch_logs.append((self.losses.avg(), self.test_losses.avg()))
        return epoch_logs


class sparenetRunner(BaseRunner):
    def __init__(self, config):
        super().__init__(config)
        self.losses = AverageMeter(["CoarseLoss", "RefineLoss"])
        self.test_losses = AverageMeter(["CoarseLoss", "RefineLoss"])

    def train_step(self, items):
        _, data = items
        _loss, _, _, _, refine_loss, coarse_loss = self.completion(data)
        self.models.zero_grad()
        _loss.backward()
        self.optimizers.step()

        self.loss["coarse_loss"] = coarse_loss * 1000
        self.loss["refine_loss"] = refine_loss * 1000
        self.loss["rec_loss"] = _loss
        self.losses.update([coarse_loss * 1000, refine_loss * 1000])

    def val_step(self, items):
        _, data = items
        _, refine_ptcloud, _, _, refine_loss, coarse_loss = self.completion(data)
        self.test_losses.update([coarse_loss.item() * 1000, refine_loss.item() * 1000])
        self.ptcloud = refine_ptcloud

    def completion(self, data):
        coarse_ptcloud, middle_ptcloud, refine_ptcloud, expansion_penalty = self.models(data)
        coarse_loss = chamfer_distance_mean(coarse_ptcloud, data["gtcloud"]).mean()
        middle_loss = chamfer_distance_mean(middle_ptcloud, data["gtcloud"]).mean()
        refine_loss = chamfer_distance_mean(refine_ptcloud, data["gtcloud"]).mean()
        _loss = coarse_loss + middle_loss + refine_loss + expansion_penalty.mean() * 0.1
        return _loss, refine_ptcloud, middle_ptcloud, coarse_ptcloud, refine_loss, coarse_loss


def graph_nodes(t):
    seen, stack = set(), [t.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is not None and fn not in seen:
            seen.add(fn)
            stack.extend(next_fn for next_fn, _ in fn.next_functions)
    return len(seen)


def make_loader(n):
    return [(None, {"partial_cloud": torch.rand(2, 10, 3), "gtcloud": torch.rand(2, 16, 3)}) for _ in range(n)]


if __name__ == "__main__":
    torch.manual_seed(0)
    sizes = []
    for n_steps in (2, 4, 6):
        runner = sparenetRunner(SimpleNamespace(lr=1e-3, n_epochs=1))
        (train_avg, val_avg), = runner.train(make_loader(n_steps), make_loader(2))
        assert train_avg[0].grad_fn is not None and runner.losses._sum[1].requires_grad
        assert all(isinstance(v, float) for v in val_avg)
        sizes.append(graph_nodes(runner.losses._sum[0]))
    assert sizes[0] < sizes[1] < sizes[2], sizes
    print("evidence holds: the training AverageMeter sums hold every step's graph: %s nodes for 2/4/6 steps" % sizes)
