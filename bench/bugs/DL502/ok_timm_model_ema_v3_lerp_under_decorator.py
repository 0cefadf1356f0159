# source: https://github.com/huggingface/pytorch-image-models/blob/main/timm/utils/model_ema.py
# category: DL502
# expect: clean
# evidence: update() is decorated with @torch.no_grad(), so the in-place lerp_ on the EMA copy's requires_grad parameters in the helper raises nothing and moves the EMA weights toward the model
from copy import deepcopy
from typing import Optional

import torch
import torch.nn as nn


class ModelEmaV3(nn.Module):
    """Moving average of the model parameters, interpolated in place."""

    def __init__(self, model, decay: float = 0.9999, device: Optional[torch.device] = None,
                 exclude_buffers: bool = False):
        super().__init__()
        self.module = deepcopy(model)
        self.module.eval()
        self.decay = decay
        self.device = device
        self.exclude_buffers = exclude_buffers

    def get_decay(self, step: Optional[int] = None) -> float:
        return self.decay

    @torch.no_grad()
    def update(self, model, step: Optional[int] = None):
        decay = self.get_decay(step)
        if self.exclude_buffers:
            self.apply_update_no_buffers_(model, decay)
        else:
            self.apply_update_(model, decay)

    def apply_update_(self, model, decay: float):
        for ema_v, model_v in zip(self.module.state_dict().values(), model.state_dict().values()):
            if ema_v.is_floating_point():
                ema_v.lerp_(model_v.to(device=self.device), weight=1. - decay)
            else:
                ema_v.copy_(model_v.to(device=self.device))

    def apply_update_no_buffers_(self, model, decay: float):
        ema_params = tuple(self.module.parameters())
        model_params = tuple(model.parameters())
        for ema_p, model_p in zip(ema_params, model_params):
            ema_p.lerp_(model_p.to(device=self.device), weight=1. - decay)
        for ema_b, model_b in zip(self.module.buffers(), model.buffers()):
            ema_b.copy_(model_b.to(device=self.device))

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)


def train_one_epoch(model, model_ema, loader, optimizer, loss_fn):
    model.train()
    for step, (input, target) in enumerate(loader):
        output = model(input)
        loss = loss_fn(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if model_ema is not None:
            model_ema.update(model, step=step)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
    model_ema = ModelEmaV3(model, decay=0.5, exclude_buffers=True)
    ema_before = [p.detach().clone() for p in model_ema.module.parameters()]
    assert all(p.requires_grad and p.is_leaf for p in model_ema.module.parameters())
    loader = [(torch.randn(4, 8), torch.randint(0, 3, (4,))) for _ in range(3)]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_one_epoch(model, model_ema, loader, optimizer, nn.CrossEntropyLoss())
    moved = [not torch.equal(b, p.detach()) for b, p in zip(ema_before, model_ema.module.parameters())]
    assert all(moved)
    print("evidence holds: the decorated update() interpolates the EMA parameters in place without error")
