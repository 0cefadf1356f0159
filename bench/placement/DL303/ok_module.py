# source: placement matrix
# category: DL303
# expect: clean
# evidence: with the forward pass outside no_grad, backward reaches every parameter and sgd.step() changes the weights.
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
        pred = net(xb)
        err = mse(pred, yb)
        err.backward()
        sgd.step()
except RuntimeError as exc:
    error = str(exc)

assert error is None, error
assert all(p.grad is not None for p in net.parameters())
assert all(not torch.equal(b, p.detach()) for b, p in zip(before, net.parameters()))
print("evidence holds: forward with grad -> gradients reach parameters, weights change")
