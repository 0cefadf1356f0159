# source: placement matrix
# category: DL102
# expect: flag 18
# evidence: the target sync rebinds each target parameter's .data to the online parameter's storage, so the next optimizer step moves the target too: after the loop the target shares storage with, and equals, the online net.
import copy
import torch
from torch import nn

torch.manual_seed(0)
qnet = nn.Linear(4, 2)
target = copy.deepcopy(qnet).requires_grad_(False)
opt = torch.optim.SGD(qnet.parameters(), lr=0.1)
transitions = [(torch.randn(8, 4), torch.randint(0, 2, (8,)), torch.randn(8), torch.randn(8, 4)) for _ in range(4)]

for step, (s, a, r, s2) in enumerate(transitions):
    if step % 2 == 0:
        for tp, qp in zip(target.parameters(), qnet.parameters()):
            tp.data = qp.data
    with torch.no_grad():
        y = r + 0.9 * target(s2).max(1).values
    q = qnet(s).gather(1, a[:, None]).squeeze(1)
    opt.zero_grad()
    nn.functional.mse_loss(q, y).backward()
    opt.step()

# check: the last sync was at step 2 and step 3 stepped only qnet, so the target should lag behind
assert all(tp.data_ptr() == qp.data_ptr() for tp, qp in zip(target.parameters(), qnet.parameters()))
assert torch.equal(target.weight, qnet.weight), "target lags behind the online net"
print("evidence holds: the .data rebind aliased the target to the online weights (the optimizer step moved the target)")
