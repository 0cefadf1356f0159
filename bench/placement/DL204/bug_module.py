# source: placement matrix
# category: DL204
# expect: flag 20
# evidence: scaling the detached alias in place also scales the sigmoid output autograd saved, so backward raises "one of the variables needed for gradient computation has been modified by an inplace operation".
import torch
from torch import nn

torch.manual_seed(0)
net = nn.Linear(3, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
batches = [(torch.randn(4, 3), torch.rand(4, 1)) for _ in range(3)]
before = net.weight.detach().clone()
shown = []
caught = None
try:
    for xb, yb in batches:
        opt.zero_grad()
        prob = torch.sigmoid(net(xb))
        pct = prob.detach()
        pct.mul_(100)
        shown.append(pct.mean().item())
        err = ((prob - yb) ** 2).mean()
        err.backward()
        opt.step()
except RuntimeError as e:
    caught = str(e)

assert caught is not None and "modified by an inplace operation" in caught
assert torch.equal(net.weight.detach(), before)
print("evidence holds: the in-place edit of the detached alias breaks backward; weights unchanged")
