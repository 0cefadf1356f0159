# source: placement matrix
# category: DL203
# expect: flag 30
# evidence: the loss is built only from a detached prediction, so backward raises "element 0 of tensors does not require grad and does not have a grad_fn" and the weights never change.
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
        pred = net(xb).detach()
        err = ((pred - yb) ** 2).mean()
        err.backward()
        opt.step()
except RuntimeError as e:
    caught = str(e)

assert caught is not None
assert "element 0 of tensors does not require grad and does not have a grad_fn" in caught
assert torch.equal(net.fc.weight.detach(), before)
print("evidence holds: backward on a loss built from a detached prediction raises; weights unchanged")
