# source: placement matrix
# category: DL501
# expect: clean
# evidence: `(torch.randn(...) * 0.01).requires_grad_()` is a leaf, gets a gradient, and the optimizer updates it.
import torch
from torch import nn


class Scaler(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.Tanh()

    def forward(self, x, w, b):
        return self.act(x @ w + b)


torch.manual_seed(0)
net = Scaler()
w = (torch.randn(4, 1) * 0.01).requires_grad_()
b = torch.zeros(1, requires_grad=True)
xs, ys = torch.randn(8, 4), torch.randn(8, 1)
start = w.detach().clone()
error = None
try:
    sgd = torch.optim.SGD([w, b], lr=0.1)
    for _ in range(3):
        sgd.zero_grad()
        ((net(xs, w, b) - ys) ** 2).mean().backward()
        sgd.step()
except ValueError as exc:
    error = str(exc)

assert w.is_leaf and w.grad is not None
assert error is None, error
assert not torch.equal(start, w.detach())
print("evidence holds: w is a leaf, gets a gradient and is updated")
