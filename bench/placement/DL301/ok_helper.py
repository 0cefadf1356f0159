# source: placement matrix
# category: DL301
# expect: clean
# evidence: the caller puts g in eval mode and runs the helper-driven loop under torch.no_grad(), so no collected output carries a grad_fn.
import torch
from torch import nn


def forward_once(g, xb):
    return g(xb)


def collect(g, batches):
    g.eval()
    probs = []
    with torch.no_grad():
        for xb in batches:
            probs.append(forward_once(g, xb))
    return probs


if __name__ == "__main__":
    torch.manual_seed(0)
    g = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Dropout(0.2), nn.Linear(8, 2))
    batches = [torch.randn(4, 3) for _ in range(5)]
    probs = collect(g, batches)
    assert len(probs) == 5
    assert all(not p.requires_grad and p.grad_fn is None for p in probs)
    print("evidence holds: the helper-driven eval loop returns 5 outputs without autograd graphs")
