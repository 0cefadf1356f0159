# source: placement matrix
# category: DL304
# expect: clean
# evidence: with torch.no_grad() entered as a context, the embeddings are computed without a graph (no grad_fn).
import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(5, 3)

    def forward(self, x):
        return torch.relu(self.proj(x))


torch.manual_seed(0)
enc = Encoder()
points = torch.randn(16, 5)
with torch.no_grad():
    emb = enc(points)

assert torch.is_grad_enabled()
assert not emb.requires_grad and emb.grad_fn is None
print("evidence holds: with torch.no_grad() -> output has no grad_fn")
