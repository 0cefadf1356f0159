# source: placement matrix
# category: DL301
# expect: flag 12, 13
# evidence: run() puts f in eval mode and loops over the batches with grad mode on, so every returned output carries a grad_fn and keeps its autograd graph alive.
import torch
import torch.nn as nn


def run(f, batches):
    f.eval()
    results = []
    for inp in batches:
        results.append(f(inp))
    return results


if __name__ == "__main__":
    torch.manual_seed(0)
    f = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2))
    data = [torch.randn(4, 3) for _ in range(5)]
    results = run(f, data)
    assert len(results) == 5
    assert all(r.requires_grad and r.grad_fn is not None for r in results)
    print("evidence holds: run() returns 5 eval outputs that all carry a grad_fn")
