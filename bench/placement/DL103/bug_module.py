# source: placement matrix
# category: DL103
# expect: flag 22
# evidence: the running total reads the 0-dim loss through .data[0], which raises IndexError "invalid index of a 0-dim tensor" after the first step, so training stops there.
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
        running += err.data[0]
except IndexError as exc:
    raised = exc

# check
assert raised is not None and "invalid index of a 0-dim tensor" in str(raised), raised
assert running == 0.0
print("evidence holds: .data[0] on the 0-dim loss raised IndexError and the loop stopped")
