# source: placement matrix
# category: DL505
# expect: clean
# evidence: the loss computed with torch ops reaches the network, which gets gradients and changes.
import numpy as np
import torch
from torch import nn

torch.manual_seed(0)


class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 1)

    def forward(self, x):
        return self.lin(x)


net = Regressor()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x, y = torch.randn(8, 3), torch.randn(8, 1)
w0 = net.lin.weight.detach().clone()
for _ in range(3):
    pred = net(x)
    loss = (pred - y).abs().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()

assert net.lin.weight.grad is not None
assert not torch.equal(net.lin.weight.detach(), w0)
assert np.isfinite(loss.item())
print("evidence holds: the weights got gradients and changed")
