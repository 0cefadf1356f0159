# source: placement matrix
# category: DL101
# expect: flag 19
# evidence: the in-place clamp through .data overwrites the sigmoid output autograd saved for backward, so the trained weights differ from the same training with the clamp visible to autograd.
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
    prob.data.clamp_(0.05, 0.95)
    F.binary_cross_entropy(prob, yb).backward()
    opt.step()

# check: replay the same training with the clamp written out of place
ref_opt = torch.optim.SGD(start.parameters(), lr=0.5)
for xb, yb in batches:
    ref_opt.zero_grad()
    F.binary_cross_entropy(torch.sigmoid(start(xb)).clamp(0.05, 0.95), yb).backward()
    ref_opt.step()
same = all(torch.allclose(a, b) for a, b in zip(net.parameters(), start.parameters()))
assert not same, "weights match the reference: the hidden clamp changed nothing"
print("evidence holds: the .data clamp silently corrupted the gradients (weights differ from the visible-clamp run)")
