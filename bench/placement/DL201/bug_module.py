# source: placement matrix
# category: DL201
# expect: flag 18
# evidence: the encoder's output is detached before the head, so the encoder parameters that Adam owns get grad None and end the loop unchanged while the head trains.
import torch
from torch import nn

torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(6, 4), nn.ReLU())
head = nn.Linear(4, 3)
opt = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=0.01)
batches = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(3)]
enc_before = [p.detach().clone() for p in encoder.parameters()]
head_before = head.weight.detach().clone()

for xb, yb in batches:
    opt.zero_grad()
    feats = encoder(xb).detach()
    loss = nn.functional.cross_entropy(head(feats), yb)
    loss.backward()
    opt.step()

# check
assert all(p.requires_grad and p.grad is None for p in encoder.parameters())
assert all(torch.equal(p, b) for p, b in zip(encoder.parameters(), enc_before)), "encoder moved"
assert not torch.equal(head.weight, head_before)
print("evidence holds: the detach froze the encoder (grad None, weights unchanged) although Adam steps it")
