# source: placement matrix
# category: DL301
# expect: flag 10, 16, 17
# evidence: the caller puts g in eval mode and loops over the batches calling a helper that runs g, with grad mode on, so every collected output carries a grad_fn and keeps its graph alive.
import torch
from torch import nn


def forward_once(g, xb):
    return g(xb)


def collect(g, batches):
    g.eval()
    probs = []
    for xb in batches:
        probs.append(forward_once(g, xb))
    return probs


if __name__ == "__main__":
    torch.manual_seed(0)
    g = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 2))
    batches = [torch.randn(4, 3) for _ in range(5)]
    probs = collect(g, batches)
    assert len(probs) == 5
    assert all(p.requires_grad and p.grad_fn is not None for p in probs)
    print("evidence holds: the helper-driven eval loop returns 5 outputs that all carry a grad_fn")
