# source: placement matrix
# category: DL502
# expect: flag 30
# evidence: the manual update `p -= lr * p.grad` outside no_grad raises "a leaf Variable that requires grad is being used in an in-place operation" and the weights stay unchanged.
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)


torch.manual_seed(0)
net = Net()
lr = 0.1
mse = nn.MSELoss()
batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
before = [p.detach().clone() for p in net.parameters()]
error = None
try:
    for xb, yb in batches:
        net.zero_grad()
        mse(net(xb), yb).backward()
        for p in net.parameters():
            p -= lr * p.grad
except RuntimeError as exc:
    error = str(exc)

assert error is not None and "a leaf Variable that requires grad" in error, error
assert all(torch.equal(b, p.detach()) for b, p in zip(before, net.parameters()))
print("evidence holds: in-place update of a parameter outside no_grad raises, weights unchanged")
