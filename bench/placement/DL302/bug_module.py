# source: placement matrix
# category: DL302
# expect: flag 31
# evidence: forward, loss and backward all sit inside torch.no_grad(), so the loss has no grad_fn, backward raises "element 0 of tensors does not require grad and does not have a grad_fn" and the weights never change.
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
        with torch.no_grad():
            out = net(xb)
            err = ((out - yb) ** 2).mean()
            err.backward()
        opt.step()
except RuntimeError as e:
    caught = str(e)

assert caught is not None
assert "element 0 of tensors does not require grad and does not have a grad_fn" in caught
assert torch.equal(net.fc.weight.detach(), before)
print("evidence holds: backward inside torch.no_grad() raises; weights unchanged")
