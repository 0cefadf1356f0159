# source: placement matrix
# category: DL201
# expect: flag 17, 18
# evidence: the encoder is called under torch.no_grad() although Adam owns its parameters, so they get grad None and end the loop unchanged while the head trains.
import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 4))
head = nn.Linear(4, 2)
opt = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=0.01)
batches = [(torch.randn(8, 6), torch.randint(0, 2, (8,))) for _ in range(3)]
enc0 = [p.detach().clone() for p in encoder.parameters()]

for x, y in batches:
    opt.zero_grad()
    with torch.no_grad():
        feats = encoder(x)
    loss = nn.functional.cross_entropy(head(feats), y)
    loss.backward()
    opt.step()

# check
assert all(p.requires_grad and p.grad is None for p in encoder.parameters())
assert all(torch.equal(p, q) for p, q in zip(encoder.parameters(), enc0)), "encoder moved"
assert head.weight.grad is not None
print("evidence holds: no_grad froze the encoder (grad None, weights unchanged) although Adam steps it")
