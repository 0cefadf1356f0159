# source: https://github.com/MC-E/Deep-Generalized-Unfolding-Networks-for-Image-Restoration/issues/6
# category: DL505
# expect: flag 91, 92
# evidence: the per-stage losses are re-packed with torch.tensor([...], requires_grad=True); backward() no longer errors but the new leaf is cut from the network, so every DGUNet parameter keeps grad None and the weights never change.
import random

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

######### Set Seeds ###########
random.seed(1234)
np.random.seed(1234)
torch.manual_seed(1234)


class CharbonnierLoss(nn.Module):
    """Charbonnier Loss (L1)"""

    def __init__(self, eps=1e-3):
        super(CharbonnierLoss, self).__init__()
        self.eps = eps

    def forward(self, x, y):
        diff = x - y
        loss = torch.mean(torch.sqrt((diff * diff) + (self.eps * self.eps)))
        return loss


class EdgeLoss(nn.Module):
    def __init__(self):
        super(EdgeLoss, self).__init__()
        self.loss = CharbonnierLoss()

    def laplacian_kernel(self, current):
        k = torch.tensor([[0., 1., 0.], [1., -4., 1.], [0., 1., 0.]]).view(1, 1, 3, 3)
        return F.conv2d(current, k.repeat(current.shape[1], 1, 1, 1), padding=1, groups=current.shape[1])

    def forward(self, x, y):
        return self.loss(self.laplacian_kernel(x), self.laplacian_kernel(y))


class DGUNet(nn.Module):
    """Tiny stand-in returning one restored image per unfolding stage."""

    def __init__(self, n_stages=3):
        super().__init__()
        self.stages = nn.ModuleList(nn.Conv2d(3, 3, 3, padding=1) for _ in range(n_stages))

    def forward(self, img):
        outs, x = [], img
        for stage in self.stages:
            x = x + stage(x)
            outs.append(x)
        return outs[::-1]


######### Model ###########
model_restoration = DGUNet()
new_lr = 2e-4
optimizer = optim.Adam(model_restoration.parameters(), lr=new_lr, betas=(0.9, 0.999), eps=1e-8)

######### Loss ###########
criterion_char = CharbonnierLoss()
criterion_edge = EdgeLoss()

######### DataLoaders ###########
train_dataset = TensorDataset(torch.rand(8, 3, 16, 16), torch.rand(8, 3, 16, 16))
train_loader = DataLoader(dataset=train_dataset, batch_size=4, shuffle=True, drop_last=False)

w_before = [p.detach().clone() for p in model_restoration.parameters()]

for epoch in range(1, 3):
    epoch_loss = 0
    model_restoration.train()
    for i, data in enumerate(train_loader, 0):

        # zero_grad
        for param in model_restoration.parameters():
            param.grad = None

        target = data[0]
        input_ = data[1]

        restored = model_restoration(input_)

        # Compute loss at each stage
        loss_char = torch.tensor([criterion_char(restored[j], target) for j in range(len(restored))], requires_grad=True).sum()
        loss_edge = torch.tensor([criterion_edge(restored[j], target) for j in range(len(restored))], requires_grad=True).sum()
        loss = (loss_char) + (0.05 * loss_edge)

        loss.backward()
        optimizer.step()
        epoch_loss += loss.item()

    print("Epoch: {}\tLoss: {:.4f}".format(epoch, epoch_loss))


if __name__ == "__main__":
    params = list(model_restoration.parameters())
    assert all(p.grad is None for p in params)
    assert all(torch.equal(a, p.detach()) for a, p in zip(w_before, params))
    print("evidence holds: loss.backward() ran, yet all", len(params), "DGUNet parameters have grad None and are unchanged")
