# source: https://github.com/PRBonn/lidar-bonnetal/issues/99
# category: DL201
# expect: flag 41
# evidence: after decoder(*encoder(x)) and backward, every conv1b parameter has grad None while conv1a and the fire layers get gradients
import torch
import torch.nn as nn
import torch.nn.functional as F


class Fire(nn.Module):
    def __init__(self, inplanes, planes, stride):
        super().__init__()
        self.conv = nn.Conv2d(inplanes, planes, kernel_size=3, stride=(1, stride), padding=1)
        self.bn = nn.BatchNorm2d(planes)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class Backbone(nn.Module):
    def __init__(self, in_channels=5):
        super().__init__()
        self.conv1a = nn.Sequential(nn.Conv2d(in_channels, 16, kernel_size=3, stride=(1, 2), padding=1), nn.BatchNorm2d(16), nn.ReLU())
        self.conv1b = nn.Sequential(nn.Conv2d(in_channels, 16, kernel_size=1, stride=1, padding=0), nn.BatchNorm2d(16))
        self.fire23 = Fire(16, 32, stride=2)
        self.fire45 = Fire(32, 32, stride=2)

    def run_layer(self, x, layer, skips, os):
        y = layer(x)
        if y.shape[2] < x.shape[2] or y.shape[3] < x.shape[3]:
            skips[os] = x.detach()
            os *= 2
        x = y
        return x, skips, os

    def forward(self, x):
        skips = {}
        os = 1
        skip_in = self.conv1b(x)
        x = self.conv1a(x)
        skips[1] = skip_in.detach()
        os *= 2
        x, skips, os = self.run_layer(x, self.fire23, skips, os)
        x, skips, os = self.run_layer(x, self.fire45, skips, os)
        return x, skips


class Decoder(nn.Module):
    def __init__(self, nclasses=3):
        super().__init__()
        self.up3 = nn.ConvTranspose2d(32, 32, kernel_size=(1, 4), stride=(1, 2), padding=(0, 1))
        self.up2 = nn.ConvTranspose2d(32, 16, kernel_size=(1, 4), stride=(1, 2), padding=(0, 1))
        self.up1 = nn.ConvTranspose2d(16, 16, kernel_size=(1, 4), stride=(1, 2), padding=(0, 1))
        self.head = nn.Conv2d(16, nclasses, kernel_size=3, padding=1)

    def forward(self, x, skips):
        x = F.relu(self.up3(x)) + skips[4]
        x = F.relu(self.up2(x)) + skips[2]
        x = F.relu(self.up1(x)) + skips[1]
        return self.head(x)


def train_step(encoder, decoder, optimizer, criterion, scan, labels):
    output = decoder(*encoder(scan))
    loss = criterion(output, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    encoder, decoder = Backbone(), Decoder()
    params = list(encoder.parameters()) + list(decoder.parameters())
    optimizer = torch.optim.SGD(params, lr=0.01, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    scan = torch.randn(2, 5, 4, 16)
    labels = torch.randint(0, 3, (2, 4, 16))
    train_step(encoder, decoder, optimizer, criterion, scan, labels)
    none = [n for n, p in encoder.named_parameters() if p.grad is None]
    assert none and all(n.startswith("conv1b.") for n in none), none
    assert all(p.grad is not None for p in encoder.conv1a.parameters())
    assert all(p.grad is not None for p in encoder.fire23.parameters())
    print("evidence holds: conv1b gets no gradient (", ", ".join(none), ") while the rest of the backbone trains")
