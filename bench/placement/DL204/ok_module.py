# source: placement matrix
# category: DL204
# expect: clean
# evidence: the alias is a clone, so scaling it leaves the saved sigmoid output intact; backward runs, the weights move, and prob stays in [0, 1].
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
        pct = prob.detach().clone()
        pct.mul_(100)
        shown.append(pct.mean().item())
        err = ((prob - yb) ** 2).mean()
        err.backward()
        opt.step()
except RuntimeError as e:
    caught = str(e)

assert caught is None
assert net.weight.grad is not None and not torch.equal(net.weight.detach(), before)
assert prob.max().item() <= 1.0 and len(shown) == 3
print("evidence holds: the cloned alias is edited safely; backward runs and the weights change")
