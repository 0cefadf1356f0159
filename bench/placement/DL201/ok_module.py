# source: placement matrix
# category: DL201
# expect: clean
# evidence: the encoder's output reaches the loss uncut, so every encoder parameter gets a gradient and Adam moves it along with the head.
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
    feats = encoder(xb)
    loss = nn.functional.cross_entropy(head(feats), yb)
    loss.backward()
    opt.step()

# check
assert all(p.grad is not None and p.grad.abs().sum().item() > 0 for p in encoder.parameters())
assert not any(torch.equal(p, b) for p, b in zip(encoder.parameters(), enc_before)), "encoder frozen"
assert not torch.equal(head.weight, head_before)
print("evidence holds: gradients reach the encoder and Adam trains it with the head")
