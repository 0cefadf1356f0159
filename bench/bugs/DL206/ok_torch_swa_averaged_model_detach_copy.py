# source: https://github.com/pytorch/pytorch/blob/main/torch/optim/swa_utils.py
# category: DL206
# expect: clean
# evidence: p_averaged.detach().copy_(...) is a statement whose last call writes in place through the detached alias: the averaged weights equal the running mean of the trained weights
import itertools
from copy import deepcopy

import torch
from torch import nn
import torch.nn.functional as F


def get_swa_avg_fn():
    @torch.no_grad()
    def swa_update(averaged_param, current_param, num_averaged):
        return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


class AveragedModel(nn.Module):
    def __init__(self, model, avg_fn=None, use_buffers=False):
        super().__init__()
        self.module = deepcopy(model)
        self.register_buffer("n_averaged", torch.tensor(0, dtype=torch.long))
        self.avg_fn = avg_fn if avg_fn is not None else get_swa_avg_fn()
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        self_param = (
            itertools.chain(self.module.parameters(), self.module.buffers())
            if self.use_buffers else self.parameters()
        )
        model_param = (
            itertools.chain(model.parameters(), model.buffers())
            if self.use_buffers else model.parameters()
        )
        self_param_detached = []
        model_param_detached = []
        copy_param = bool(self.n_averaged == 0)
        for p_averaged, p_model in zip(self_param, model_param):
            p_model_ = p_model.detach().to(p_averaged.device)
            self_param_detached.append(p_averaged.detach())
            model_param_detached.append(p_model_)
            if copy_param:
                p_averaged.detach().copy_(p_model_)

        if self.n_averaged > 0:
            for p_averaged, p_model in zip(self_param_detached, model_param_detached):
                n_averaged = self.n_averaged.to(p_averaged.device)
                p_averaged.detach().copy_(self.avg_fn(p_averaged.detach(), p_model, n_averaged))

        if not self.use_buffers:
            # keep the buffers in sync with the source model
            for b_swa, b_model in zip(self.module.buffers(), model.buffers()):
                b_swa.detach().copy_(b_model.detach().to(b_swa.device))
        self.n_averaged += 1


def train(model, swa_model, loader, optimizer, epochs, swa_start):
    snapshots = []
    for epoch in range(epochs):
        model.train()
        for input, target in loader:
            optimizer.zero_grad()
            F.cross_entropy(model(input), target).backward()
            optimizer.step()
        if epoch >= swa_start:
            swa_model.update_parameters(model)
            snapshots.append([p.detach().clone() for p in model.parameters()])
    return snapshots


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))
    swa_model = AveragedModel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = [(torch.randn(16, 6), torch.randint(0, 3, (16,))) for _ in range(4)]
    snapshots = train(model, swa_model, loader, optimizer, epochs=5, swa_start=2)
    assert int(swa_model.n_averaged) == 3
    for i, p_avg in enumerate(swa_model.module.parameters()):
        expected = torch.stack([snap[i] for snap in snapshots]).mean(0)
        assert torch.allclose(p_avg, expected, atol=1e-6)
        assert p_avg.grad is None
    print("evidence holds: the averaged weights equal the mean of the 3 snapshots, written through detach().copy_")
