# source: https://github.com/yastrebksv/TennisCourtDetector/issues/7
# category: DL601
# expect: flag 56, 57
# evidence: base_trainer.train() calls loss.backward() and optimizer.step() every iteration but never zeroes gradients, so after k steps each parameter's .grad is the sum of all k per-step gradients.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class ConvBlock(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size=3, pad=1, stride=1, bias=True):
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=pad, bias=bias),
            nn.ReLU(),
            nn.BatchNorm2d(out_channels)
        )

    def forward(self, x):
        return self.block(x)


class BallTrackerNet(nn.Module):
    """Trimmed TrackNet encoder/decoder (same building blocks, fewer layers)."""

    def __init__(self, out_channels=14):
        super().__init__()
        self.out_channels = out_channels
        self.conv1 = ConvBlock(in_channels=3, out_channels=8)
        self.pool1 = nn.MaxPool2d(kernel_size=2, stride=2)
        self.conv2 = ConvBlock(in_channels=8, out_channels=8)
        self.ups1 = nn.Upsample(scale_factor=2)
        self.conv3 = ConvBlock(in_channels=8, out_channels=self.out_channels)

    def forward(self, x):
        x = self.conv1(x)
        x = self.pool1(x)
        x = self.conv2(x)
        x = self.ups1(x)
        return self.conv3(x)


def train(model, train_loader, optimizer, criterion, device, epoch, max_iters=1000):
    model.train()
    losses = []
    max_iters = min(max_iters, len(train_loader))

    for iter_id, batch in enumerate(train_loader):
        out = model(batch[0].float().to(device))
        gt_hm_hp = batch[1].float().to(device)
        loss = criterion(F.sigmoid(out), gt_hm_hp)

        loss.backward()
        optimizer.step()
        print('train, epoch = {}, iter_id = {}/{}, loss = {}'.format(epoch, iter_id, max_iters, loss.item()))
        losses.append(loss.item())
        if iter_id > max_iters:
            break

    return np.mean(losses)


if __name__ == '__main__':
    device = 'cpu'
    data = torch.utils.data.TensorDataset(torch.rand(6, 3, 8, 8), torch.rand(6, 15, 8, 8))
    train_loader = torch.utils.data.DataLoader(data, batch_size=2, shuffle=False)
    model = BallTrackerNet(out_channels=15).to(device)
    criterion = nn.MSELoss()
    # lr=0 keeps the weights fixed so the per-step gradients can be recomputed exactly
    optimizer = torch.optim.Adam(model.parameters(), 0.0, betas=(0.9, 0.999), weight_decay=0)

    # reference: the gradient each step would have on its own (BatchNorm in train mode, same batches)
    ref = torch.zeros_like(model.conv3.block[0].weight)
    for x, y in train_loader:
        g, = torch.autograd.grad(criterion(F.sigmoid(model(x)), y), model.conv3.block[0].weight)
        ref += g
    model.zero_grad()

    train_loss = train(model, train_loader, optimizer, criterion, device, epoch=0, max_iters=10)
    accumulated = model.conv3.block[0].weight.grad
    assert torch.allclose(accumulated, ref, atol=1e-6)
    print("evidence holds: .grad after 3 steps equals the SUM of the 3 per-step gradients (norm %.4f)"
          % accumulated.norm().item())
