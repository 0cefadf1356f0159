# source: placement matrix
# category: DL303
# expect: flag 28, 29, 31
# evidence: the forward pass runs under torch.no_grad(), so backward raises "does not require grad" and sgd.step() never changes the weights.
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
sgd = torch.optim.SGD(net.parameters(), lr=0.1)
mse = nn.MSELoss()
batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
before = [p.detach().clone() for p in net.parameters()]
error = None
try:
    for xb, yb in batches:
        sgd.zero_grad()
        with torch.no_grad():
            pred = net(xb)
        err = mse(pred, yb)
        err.backward()
        sgd.step()
except RuntimeError as exc:
    error = str(exc)

assert error is not None and "does not require grad" in error, error
assert all(torch.equal(b, p.detach()) for b, p in zip(before, net.parameters()))
print("evidence holds: forward under no_grad -> backward raises, weights unchanged")
