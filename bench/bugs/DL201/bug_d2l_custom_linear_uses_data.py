# source: https://github.com/d2l-ai/d2l-en/pull/2600
# category: DL201
# expect: flag 17
# evidence: after training, the MyLinear layer's weight and bias have grad None and keep their initial values; only the nn.Linear head learns
import torch
from torch import nn
from torch.nn import functional as F


class MyLinear(nn.Module):
    def __init__(self, in_units, units):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_units, units))
        self.bias = nn.Parameter(torch.randn(units,))

    def forward(self, X):
        linear = torch.matmul(X, self.weight.data) + self.bias.data
        return F.relu(linear)


def train(net, features, labels, num_epochs=5, lr=0.03):
    loss = nn.MSELoss()
    trainer = torch.optim.SGD(net.parameters(), lr=lr)
    for epoch in range(num_epochs):
        for X, y in zip(features.split(10), labels.split(10)):
            l = loss(net(X), y)
            trainer.zero_grad()
            l.backward()
            trainer.step()
    return net


if __name__ == "__main__":
    torch.manual_seed(0)
    net = nn.Sequential(MyLinear(64, 8), nn.Linear(8, 1))
    features = torch.randn(40, 64)
    labels = torch.randn(40, 1)
    w_before = net[0].weight.detach().clone()
    head_before = net[1].weight.detach().clone()
    train(net, features, labels)
    assert net[0].weight.grad is None and net[0].bias.grad is None
    assert torch.equal(w_before, net[0].weight)
    assert not torch.equal(head_before, net[1].weight)
    print("evidence holds: MyLinear reads self.weight.data, so its parameters never get a gradient and never train")
