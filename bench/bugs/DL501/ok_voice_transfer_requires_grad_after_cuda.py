# source: https://github.com/mazzzystar/randomCNN-voice-transfer/blob/master/train.py
# category: DL501
# expect: clean
# evidence: the spectrogram is scaled and moved first and flagged requires_grad last, so it is a leaf: Adam accepts it, it gets a gradient and changes
import math
import time

import torch
import torch.nn as nn

cuda = True if torch.cuda.is_available() else False


class RandomCNN(nn.Module):
    """Untrained conv net used as a fixed feature extractor."""

    def __init__(self):
        super(RandomCNN, self).__init__()
        self.conv1 = nn.Conv2d(1, 8, kernel_size=(3, 1), stride=1, padding=0)
        self.LeakyReLU = nn.LeakyReLU(0.2)

    def forward(self, x_delta):
        return self.LeakyReLU(self.conv1(x_delta))


def compute_content_loss(a_C, a_G):
    m, n_C, n_H, n_W = a_G.shape
    return torch.sum((a_C - a_G) ** 2) / (4 * n_H * n_W * n_C)


def gram(x):
    return torch.matmul(x, x.t())


def compute_layer_style_loss(a_S, a_G):
    m, n_C, n_H, n_W = a_G.shape
    a_S = a_S.view(m * n_C, n_H * n_W)
    a_G = a_G.view(m * n_C, n_H * n_W)
    return torch.sum((gram(a_S) - gram(a_G)) ** 2) / (4 * (n_C ** 2) * (n_H * n_W) ** 2)


def timeSince(since):
    s = time.time() - since
    m = math.floor(s / 60)
    return '%dm %ds' % (m, s - m * 60)


def transfer(a_content_torch, a_style_torch, num_epochs=5, content_param=1e2, style_param=1.0):
    model = RandomCNN()
    model.eval()
    a_C_var = a_content_torch.float()
    a_S_var = a_style_torch.float()
    if cuda:
        model = model.cuda()
        a_C_var = a_C_var.cuda()
        a_S_var = a_S_var.cuda()
    with torch.no_grad():
        a_C = model(a_C_var)
        a_S = model(a_S_var)

    a_G_var = torch.randn(a_content_torch.shape) * 1e-3
    if cuda:
        a_G_var = a_G_var.cuda()
    a_G_var.requires_grad = True
    optimizer = torch.optim.Adam([a_G_var], lr=0.01)

    start = time.time()
    for epoch in range(1, num_epochs + 1):
        optimizer.zero_grad()
        a_G = model(a_G_var)
        content_loss = content_param * compute_content_loss(a_C, a_G)
        style_loss = style_param * compute_layer_style_loss(a_S, a_G)
        loss = content_loss + style_loss
        loss.backward()
        optimizer.step()
    print(timeSince(start), loss.item())
    return a_G_var


if __name__ == "__main__":
    torch.manual_seed(0)
    content = torch.randn(1, 1, 12, 6)
    style = torch.randn(1, 1, 12, 6)
    torch.manual_seed(1)
    start_values = torch.randn(content.shape) * 1e-3
    torch.manual_seed(1)
    a_G_var = transfer(content, style)
    assert a_G_var.is_leaf and a_G_var.grad is not None
    assert not torch.equal(a_G_var.detach(), start_values)
    print("evidence holds: the generated spectrogram is a leaf, receives gradients and is optimised")
