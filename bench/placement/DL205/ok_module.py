# source: placement matrix
# category: DL205
# expect: clean
# evidence: z.detach() makes a stop-gradient copy for the target while z stays in the graph, so the encoder gets a gradient through head(z) and changes.
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
    anchor = z.detach()
    pred = head(z)
    err = ((pred - anchor) ** 2).mean()
    err.backward()
    opt.step()

assert enc.weight.grad is not None and head.weight.grad is not None
assert not torch.equal(enc.weight.detach(), enc_before)
print("evidence holds: with detach() the encoder still gets gradients and changes")
