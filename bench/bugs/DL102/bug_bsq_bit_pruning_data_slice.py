# source: https://github.com/yanghr/BSQ/issues/3
# category: DL102
# expect: flag 0
# evidence: after net.pruning() re-binds pweight.data/nweight.data to fewer bit planes, loss.backward() raises "returned an invalid gradient ... expected shape compatible with [6, 4, 3]", even with a fresh optimizer
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class BitLinear(nn.Module):
    """Weights stored as positive and negative bit planes: w = sum_i (p_i - n_i) * 2**i * scale."""

    def __init__(self, in_features, out_features, Nbits=3):
        super(BitLinear, self).__init__()
        self.Nbits = Nbits
        self.pweight = nn.Parameter(torch.rand(out_features, in_features, Nbits))
        self.nweight = nn.Parameter(torch.rand(out_features, in_features, Nbits))
        self.scale = 2.0 ** -Nbits

    def forward(self, x):
        planes = []
        for i in range(self.Nbits):
            planes.append((self.pweight[..., i:i + 1] - self.nweight[..., i:i + 1]) * (2 ** i))
        weight = torch.cat(planes, -1).sum(-1) * self.scale
        return F.linear(x, weight)


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.fc1 = BitLinear(4, 6)
        self.fc2 = nn.Linear(6, 2)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))

    def pruning(self, threshold=1.0):
        for name, m in self.named_modules():
            if isinstance(m, BitLinear) and m.Nbits > 1:
                weight = (m.pweight.data - m.nweight.data).cpu().numpy()
                total_weight = weight.size / m.Nbits
                nonz_weight = [(abs(weight[..., i]) > 0.5).sum() * 100 / total_weight for i in range(m.Nbits)]
                N = m.Nbits
                pweight = m.pweight.data
                nweight = m.nweight.data
                for i in range(N):
                    if nonz_weight[i] < threshold or i == 0:  # drop the first (MSB) plane
                        m.pweight.data = pweight[..., i + 1:N]
                        m.nweight.data = nweight[..., i + 1:N]
                        m.Nbits -= 1
                        break


def train_step(net, optimizer, inputs, targets):
    optimizer.zero_grad()
    loss = F.cross_entropy(net(inputs), targets)
    loss.backward()
    optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    net = Net()
    optimizer = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    inputs, targets = torch.randn(8, 4), torch.randint(0, 2, (8,))
    train_step(net, optimizer, inputs, targets)

    net.pruning()
    assert net.fc1.pweight.shape == (6, 4, 2)
    del optimizer
    optimizer = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)  # what the reporter tried
    try:
        train_step(net, optimizer, inputs, targets)
    except RuntimeError as err:
        msg = str(err)
        assert "returned an invalid gradient" in msg and "expected shape compatible with [6, 4, 3]" in msg, msg
    else:
        raise AssertionError("backward should reject the gradient of the re-bound bit planes")
    print("evidence holds: after pruning() re-bound .data, loss.backward() raised the invalid-gradient error")
