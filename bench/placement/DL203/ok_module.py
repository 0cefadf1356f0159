# source: placement matrix
# category: DL203
# expect: clean
# evidence: the prediction stays in the graph, so backward runs, the weights receive a gradient and the optimizer moves them.
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
        pred = net(xb)
        err = ((pred - yb) ** 2).mean()
        err.backward()
        opt.step()
except RuntimeError as e:
    caught = str(e)

assert caught is None
assert net.fc.weight.grad is not None
assert not torch.equal(net.fc.weight.detach(), before)
print("evidence holds: the loss keeps its graph, gradients reach the weights and they change")
