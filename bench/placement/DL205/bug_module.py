# source: placement matrix
# category: DL205
# expect: flag 18
# evidence: z.detach_() cuts z itself rather than a copy, so the head's prediction from z no longer reaches the encoder: enc.weight.grad stays None although the optimizer steps enc.
import torch
from torch import nn

torch.manual_seed(0)
enc = nn.Linear(3, 4)
head = nn.Linear(4, 4)
opt = torch.optim.SGD(list(enc.parameters()) + list(head.parameters()), lr=0.1)
batches = [torch.randn(5, 3) for _ in range(3)]
enc_before = enc.weight.detach().clone()

for xb in batches:
    opt.zero_grad()
    z = enc(xb)
    anchor = z.detach_()
    pred = head(z)
    err = ((pred - anchor) ** 2).mean()
    err.backward()
    opt.step()

assert enc.weight.grad is None and head.weight.grad is not None
assert torch.equal(enc.weight.detach(), enc_before)
print("evidence holds: after detach_() the encoder gets no gradient and never changes")
