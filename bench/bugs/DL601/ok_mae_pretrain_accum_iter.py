# source: https://github.com/facebookresearch/mae/blob/main/engine_pretrain.py
# category: DL601
# expect: clean
# evidence: gradients are deliberately accumulated over accum_iter micro-batches (loss /= accum_iter) and zeroed right after each optimizer update, so each step applies exactly the gradient of the full accumulated batch.
import math
import sys
from typing import Iterable

import torch
import torch.nn as nn

torch.manual_seed(0)


class NativeScalerWithGradNormCount:
    """util.misc.NativeScalerWithGradNormCount (amp scaler disabled on CPU)."""
    state_dict_key = "amp_scaler"

    def __init__(self):
        self._scaler = torch.amp.GradScaler("cpu", enabled=False)

    def __call__(self, loss, optimizer, clip_grad=None, parameters=None, create_graph=False, update_grad=True):
        self._scaler.scale(loss).backward(create_graph=create_graph)
        if update_grad:
            if clip_grad is not None:
                self._scaler.unscale_(optimizer)
                norm = torch.nn.utils.clip_grad_norm_(parameters, clip_grad)
            else:
                norm = None
            self._scaler.step(optimizer)
            self._scaler.update()
        else:
            norm = None
        return norm


class MaskedAutoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(16, 8)
        self.decoder = nn.Linear(8, 16)

    def forward(self, imgs, mask_ratio=0.75):
        mask = (torch.rand_like(imgs) < mask_ratio).float()
        pred = self.decoder(torch.relu(self.encoder(imgs * (1 - mask))))
        loss = (((pred - imgs) ** 2) * mask).sum() / mask.sum()
        return loss, pred, mask


class Args:
    accum_iter = 2
    mask_ratio = 0.75


def train_one_epoch(model: torch.nn.Module,
                    data_loader: Iterable, optimizer: torch.optim.Optimizer,
                    device: torch.device, epoch: int, loss_scaler,
                    log_writer=None,
                    args=None):
    model.train(True)
    accum_iter = args.accum_iter

    optimizer.zero_grad()

    for data_iter_step, (samples, _) in enumerate(data_loader):
        samples = samples.to(device, non_blocking=True)

        with torch.autocast(device_type="cpu", enabled=False):
            loss, _, _ = model(samples, mask_ratio=args.mask_ratio)

        loss_value = loss.item()

        if not math.isfinite(loss_value):
            print("Loss is {}, stopping training".format(loss_value))
            sys.exit(1)

        loss /= accum_iter
        loss_scaler(loss, optimizer, parameters=model.parameters(),
                    update_grad=(data_iter_step + 1) % accum_iter == 0)
        if (data_iter_step + 1) % accum_iter == 0:
            optimizer.zero_grad()

    return loss_value


class RecordingSGD(torch.optim.SGD):
    """SGD that records the encoder gradient it is about to apply (test instrumentation)."""

    def step(self, closure=None):
        self.recorded.append(self.param_groups[0]["params"][0].grad.clone())
        return super().step(closure)


if __name__ == "__main__":
    import copy

    model = MaskedAutoencoder()
    reference = copy.deepcopy(model)
    optimizer = RecordingSGD(model.parameters(), lr=0.1)
    optimizer.recorded = []
    data = torch.utils.data.TensorDataset(torch.rand(8, 16), torch.zeros(8))
    data_loader = torch.utils.data.DataLoader(data, batch_size=2, shuffle=False)
    w_before = model.encoder.weight.detach().clone()

    torch.manual_seed(1)
    train_one_epoch(model, data_loader, optimizer, torch.device("cpu"), 0, NativeScalerWithGradNormCount(),
                    args=Args())

    # reference: one plain SGD step per window on the mean loss of its micro-batches
    torch.manual_seed(1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    batches = list(data_loader)
    for k in range(0, len(batches), Args.accum_iter):
        window = [reference(x, mask_ratio=Args.mask_ratio)[0] for x, _ in batches[k:k + Args.accum_iter]]
        ref_opt.zero_grad()
        (sum(window) / Args.accum_iter).backward()
        assert torch.allclose(optimizer.recorded[k // Args.accum_iter], reference.encoder.weight.grad, atol=1e-6)
        ref_opt.step()

    assert len(optimizer.recorded) == len(batches) // Args.accum_iter
    assert all(p.grad is None or torch.count_nonzero(p.grad) == 0 for p in model.parameters())
    assert not torch.equal(w_before, model.encoder.weight.detach())
    print("evidence holds: each of", len(optimizer.recorded),
          "updates applied exactly the accumulated-window gradient; grads reset afterwards")
