# source: placement matrix
# category: DL501
# expect: flag 20
# evidence: `torch.randn(..., requires_grad=True) * 0.01` is a non-leaf (is_leaf False), and the optimizer refuses it with "can't optimize a non-leaf Tensor".
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
w = torch.randn(4, 1, requires_grad=True) * 0.01
b = torch.zeros(1, requires_grad=True)
xs, ys = torch.randn(8, 4), torch.randn(8, 1)
error = None
try:
    sgd = torch.optim.SGD([w, b], lr=0.1)
    for _ in range(3):
        sgd.zero_grad()
        ((net(xs, w, b) - ys) ** 2).mean().backward()
        sgd.step()
except ValueError as exc:
    error = str(exc)

assert not w.is_leaf and w.grad_fn is not None
assert error is not None and "can't optimize a non-leaf Tensor" in error, error
print("evidence holds: scaled factory result is a non-leaf; the optimizer refuses it")
