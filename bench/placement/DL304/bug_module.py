# source: placement matrix
# category: DL304
# expect: flag 21
# evidence: the bare torch.no_grad() call never enters the context, so grad mode stays on and the embeddings carry a grad_fn.
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
torch.no_grad()
emb = enc(points)

assert torch.is_grad_enabled()
assert emb.requires_grad and emb.grad_fn is not None
print("evidence holds: bare torch.no_grad() -> grad mode still on, output has grad_fn")
