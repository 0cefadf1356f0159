# source: placement matrix
# category: DL505
# expect: flag 29
# evidence: the loss computed in numpy is forced to require grad, backward runs, and the network's weights get no gradient and never change.
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
    err = np.abs(pred.detach().numpy() - y.numpy()).mean()
    loss = torch.tensor(err)
    loss.requires_grad = True
    opt.zero_grad()
    loss.backward()
    opt.step()

assert net.lin.weight.grad is None
assert torch.equal(net.lin.weight.detach(), w0)
print("evidence holds: three steps ran without error and the weights never changed")
