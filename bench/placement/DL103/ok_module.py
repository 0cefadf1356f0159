# source: placement matrix
# category: DL103
# expect: clean
# evidence: the running total reads the 0-dim loss with .item(), so all three steps run and the total is a plain float.
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(3, 5), nn.ReLU(), nn.Linear(5, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.05)
batches = [(torch.randn(8, 3), torch.randn(8, 1)) for _ in range(3)]
running = 0.0
raised = None

try:
    for xb, yb in batches:
        opt.zero_grad()
        err = F.mse_loss(net(xb), yb)
        err.backward()
        opt.step()
        running += err.item()
except IndexError as exc:
    raised = exc

# check
assert raised is None, raised
assert isinstance(running, float) and running > 0.0
print("evidence holds: .item() read every loss; the running total is a float")
