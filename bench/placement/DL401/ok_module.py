# source: placement matrix
# category: DL401
# expect: clean
# evidence: `running += err.item()` accumulates a Python float, so no step's graph outlives its backward.
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
opt = torch.optim.SGD(net.parameters(), lr=0.1)
mse = nn.MSELoss()
batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
running = 0.0
for xb, yb in batches:
    opt.zero_grad()
    err = mse(net(xb), yb)
    err.backward()
    opt.step()
    running += err.item()

assert isinstance(running, float) and running > 0
assert all(p.grad is not None for p in net.parameters())
print("evidence holds: accumulator is a float, no graph kept")
