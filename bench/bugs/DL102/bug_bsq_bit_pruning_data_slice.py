# source: https://github.com/yanghr/BSQ/issues/3
# category: DL102
# expect: flag 49, 50
# evidence: after net.pruning() re-binds pweight.data/nweight.data to fewer bit planes, the next loss.backward() raises "returned an invalid gradient ... expected shape compatible with [6, 4, 3]", even with a fresh optimizer
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
                weight = (m.pweight.detach() - m.nweight.detach()).cpu().numpy()
                total_weight = weight.size / m.Nbits
                nonz_weight = [(abs(weight[..., i]) > 0.5).sum() * 100 / total_weight for i in range(m.Nbits)]
                N = m.Nbits
                pweight = m.pweight.detach()
                nweight = m.nweight.detach()
                for i in range(N):
                    if nonz_weight[i] < threshold or i == 0:  # drop the first (MSB) plane
                        m.pweight.data = pweight[..., i + 1:N]
                        m.nweight.data = nweight[..., i + 1:N]
                        m.Nbits -= 1
                        break


def train(net, optimizer, train_loader, prune_interval=2):
    net.train()
    for batch_idx, (inputs, targets) in enumerate(train_loader, 1):
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = F.cross_entropy(outputs, targets)
        loss.backward()
        optimizer.step()
        if batch_idx % prune_interval == 0:
            net.pruning()
            # the reporter also re-created the optimizer here; it does not help
            optimizer = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    net = Net()
    optimizer = optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    train_loader = [(torch.randn(8, 4), torch.randint(0, 2, (8,))) for _ in range(3)]
    try:
        train(net, optimizer, train_loader)
    except RuntimeError as err:
        msg = str(err)
        assert "returned an invalid gradient" in msg and "expected shape compatible with [6, 4, 3]" in msg, msg
    else:
        raise AssertionError("backward should reject the gradient of the re-bound bit planes")
    assert net.fc1.pweight.shape == (6, 4, 2)
    print("evidence holds: after pruning() re-bound .data, the next loss.backward() raised the invalid-gradient error")
