# source: placement matrix
# category: DL302
# expect: clean
# evidence: the training step runs with grad mode on, so backward succeeds, the weights get a gradient and the optimizer moves them.
import torch
from torch import nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 1)

    def forward(self, x):
        return self.fc(x)


net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
batches = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)]
before = net.fc.weight.detach().clone()
caught = None
try:
    for xb, yb in batches:
        opt.zero_grad()
        out = net(xb)
        err = ((out - yb) ** 2).mean()
        err.backward()
        opt.step()
except RuntimeError as e:
    caught = str(e)

assert caught is None
assert net.fc.weight.grad is not None
assert not torch.equal(net.fc.weight.detach(), before)
print("evidence holds: with grad mode on, backward runs and the weights change")
