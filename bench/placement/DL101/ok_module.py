# source: placement matrix
# category: DL101
# expect: clean
# evidence: the clamp is an out-of-place op autograd differentiates, so the trained weights equal the reference training with the visible clamp.
import copy
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
net = nn.Linear(4, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.5)
batches = [(torch.randn(16, 4) * 3, torch.randint(0, 2, (16, 1)).float()) for _ in range(3)]
start = copy.deepcopy(net)  # untouched copy, used by the check at the end

for xb, yb in batches:
    opt.zero_grad()
    prob = torch.sigmoid(net(xb))
    prob = prob.clamp(0.05, 0.95)
    F.binary_cross_entropy(prob, yb).backward()
    opt.step()

# check: replay the same training with the clamp written out of place
ref_opt = torch.optim.SGD(start.parameters(), lr=0.5)
for xb, yb in batches:
    ref_opt.zero_grad()
    F.binary_cross_entropy(torch.sigmoid(start(xb)).clamp(0.05, 0.95), yb).backward()
    ref_opt.step()
same = all(torch.allclose(a, b) for a, b in zip(net.parameters(), start.parameters()))
assert same, "weights differ from the reference training"
print("evidence holds: gradients are those of the computed loss (weights equal the visible-clamp run)")
