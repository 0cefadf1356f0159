# source: placement matrix
# category: DL201
# expect: clean
# evidence: the encoder is frozen on purpose (requires_grad_(False), not given to Adam) and called under torch.no_grad(); only the head is optimised and it trains.
import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 4)).requires_grad_(False)
head = nn.Linear(4, 2)
opt = torch.optim.Adam(head.parameters(), lr=0.01)
batches = [(torch.randn(8, 6), torch.randint(0, 2, (8,))) for _ in range(3)]
enc0 = [p.detach().clone() for p in encoder.parameters()]
head0 = head.weight.detach().clone()

for x, y in batches:
    opt.zero_grad()
    with torch.no_grad():
        feats = encoder(x)
    loss = nn.functional.cross_entropy(head(feats), y)
    loss.backward()
    opt.step()

# check
owned = {id(p) for g in opt.param_groups for p in g["params"]}
assert not any(p.requires_grad or id(p) in owned for p in encoder.parameters())
assert all(torch.equal(p, q) for p, q in zip(encoder.parameters(), enc0))
assert head.weight.grad is not None and not torch.equal(head.weight, head0)
print("evidence holds: the encoder is frozen explicitly and owned by no optimizer; the head trains")
