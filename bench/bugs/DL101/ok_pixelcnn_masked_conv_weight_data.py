# source: https://github.com/jzbontar/pixelcnn-pytorch/blob/master/main.py
# category: DL101
# expect: clean
# evidence: after training steps the network is still causal: the logits at a pixel do not change when that pixel or any later pixel of the input changes, because forward re-masks the weight before each use
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim


class MaskedConv2d(nn.Conv2d):
    def __init__(self, mask_type, *args, **kwargs):
        super(MaskedConv2d, self).__init__(*args, **kwargs)
        assert mask_type in {'A', 'B'}
        self.register_buffer('mask', self.weight.data.clone())
        _, _, kH, kW = self.weight.size()
        self.mask.fill_(1)
        self.mask[:, :, kH // 2, kW // 2 + (mask_type == 'B'):] = 0
        self.mask[:, :, kH // 2 + 1:] = 0

    def forward(self, x):
        self.weight.data *= self.mask
        return super(MaskedConv2d, self).forward(x)


fm = 8
net = nn.Sequential(
    MaskedConv2d('A', 1, fm, 7, 1, 3, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
    MaskedConv2d('B', fm, fm, 7, 1, 3, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
    nn.Conv2d(fm, 256, 1))


def train(tr, optimizer, epochs=1):
    for epoch in range(epochs):
        net.train(True)
        for input, _ in tr:
            target = (input[:, 0] * 255).long()
            loss = F.cross_entropy(net(input), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    optimizer = optim.Adam(net.parameters(), lr=1e-2)
    tr = [(torch.rand(4, 1, 8, 8), None) for _ in range(3)]
    train(tr, optimizer)

    net.eval()
    x = torch.rand(1, 1, 8, 8)
    with torch.no_grad():
        base = net(x)
        x2 = x.clone()
        x2[0, 0, 4, 4:] = torch.rand(4)  # the pixel (4, 4) and everything after it on row 4
        x2[0, 0, 5:] = torch.rand(3, 8)  # and every later row
        out = net(x2)
    assert torch.allclose(base[0, :, 4, 4], out[0, :, 4, 4], atol=1e-6)
    assert torch.allclose(base[0, :, :4], out[0, :, :4], atol=1e-6)
    assert not torch.allclose(base[0, :, 5:], out[0, :, 5:])
    print("evidence holds: after training the masked network is still causal: pixel (4, 4) does not see itself or later pixels")
