# source: https://github.com/lyq133/LIC-HPCM/issues/4
# category: DL401
# expect: flag 101, 102, 103
# evidence: AverageMeter.update() is fed out_criterion["loss"] tensors; after train_one_epoch the meter's running sum still has a grad_fn linking the autograd graphs of every training step.
import math
import time

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader

torch.manual_seed(0)


class RateDistortionLoss(nn.Module):
    """Custom rate distortion loss with a Lagrangian parameter."""

    def __init__(self, lmbda=1e-2):
        super().__init__()
        self.mse = nn.MSELoss()
        self.lmbda = lmbda

    def forward(self, output, target):
        N, _, H, W = target.size()
        out = {}
        num_pixels = N * H * W

        out["bpp_loss"] = sum(
            (torch.log(likelihoods).sum() / (-math.log(2) * num_pixels))
            for likelihoods in output["likelihoods"].values()
        )
        out["mse_loss"] = self.mse(output["x_hat"], target)
        out["loss"] = self.lmbda * 255 ** 2 * out["mse_loss"] + out["bpp_loss"]
        return out


class AverageMeter:
    """Compute running average."""

    def __init__(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


class HPCM(nn.Module):
    """Tiny stand-in for the HPCM image codec: analysis/synthesis transforms + factorized likelihoods."""

    def __init__(self, N=8):
        super().__init__()
        self.g_a = nn.Conv2d(3, N, 4, 4)
        self.g_s = nn.ConvTranspose2d(N, 3, 4, 4)
        self.h_a = nn.Conv2d(N, N, 2, 2)
        self.scale = nn.Parameter(torch.ones(1, N, 1, 1))

    def forward(self, x):
        y = self.g_a(x)
        z = self.h_a(y)
        y_hat = y + torch.empty_like(y).uniform_(-0.5, 0.5)
        z_hat = z + torch.empty_like(z).uniform_(-0.5, 0.5)
        y_likelihoods = torch.sigmoid(y_hat / self.scale + 0.5) - torch.sigmoid(y_hat / self.scale - 0.5) + 1e-9
        z_likelihoods = torch.sigmoid(z_hat + 0.5) - torch.sigmoid(z_hat - 0.5) + 1e-9
        return {"x_hat": self.g_s(y_hat), "likelihoods": {"y": y_likelihoods, "z": z_likelihoods}}


def train_one_epoch(
    model, criterion, train_dataloader, optimizer, epoch, global_step, clip_max_norm
):
    model.train()
    device = next(model.parameters()).device
    loss = AverageMeter()
    bpp_loss = AverageMeter()
    mse_loss = AverageMeter()

    t_start = time.time()
    for i, d in enumerate(train_dataloader):

        global_step += 1
        d = d.to(device)
        optimizer.zero_grad()
        out_net = model(d)

        out_criterion = criterion(out_net, d)
        out_criterion["loss"].backward()
        if clip_max_norm > 0:
            total_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip_max_norm)
            if total_norm.isnan() or total_norm.isinf():
                print("non-finite norm, skip this batch")
                continue
        optimizer.step()

        bpp_loss.update(out_criterion["bpp_loss"])
        loss.update(out_criterion["loss"])
        mse_loss.update(out_criterion["mse_loss"])

        if i % 100 == 0:
            t_end = time.time() - t_start
            t_start = time.time()
            print(
                f"Train epoch {epoch}: ["
                f"{i*len(d)}/{len(train_dataloader.dataset)}"
                f" ({100. * i / len(train_dataloader):.0f}%)]"
                f"\tLoss: {loss.avg:.4f} |"
                f"\tMSE loss: {mse_loss.avg:.6f} |"
                f"\tBpp loss: {bpp_loss.avg:.4f} |"
                f'\t time : {t_end:.2f} |'
            )

    return global_step, loss


if __name__ == "__main__":
    train_dataset = torch.rand(24, 3, 16, 16)
    train_dataloader = DataLoader(train_dataset, batch_size=4, shuffle=True)
    net = HPCM()
    criterion = RateDistortionLoss(lmbda=0.0018)
    optimizer = optim.Adam(net.parameters(), lr=1e-4)
    global_step, loss_meter = train_one_epoch(net, criterion, train_dataloader, optimizer, 0, 0, 1.0)
    assert torch.is_tensor(loss_meter.sum) and loss_meter.sum.grad_fn is not None
    seen, stack, n_conv = set(), [loss_meter.sum.grad_fn], 0
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        n_conv += type(node).__name__ == "ConvolutionBackward0"
        stack.extend(n for n, _ in node.next_functions)
    assert n_conv == 3 * len(train_dataloader), n_conv
    print("evidence holds: loss meter's sum keeps", n_conv, "conv nodes of", len(train_dataloader), "steps alive")
