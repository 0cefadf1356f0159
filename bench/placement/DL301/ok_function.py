# source: placement matrix
# category: DL301
# expect: clean
# evidence: run() puts f in eval mode and loops over the batches under torch.inference_mode(), so no returned output carries a grad_fn.
import torch
import torch.nn as nn


def run(f, batches):
    f.eval()
    results = []
    with torch.inference_mode():
        for inp in batches:
            results.append(f(inp))
    return results


if __name__ == "__main__":
    torch.manual_seed(0)
    f = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Dropout(0.5), nn.Linear(8, 2))
    data = [torch.randn(4, 3) for _ in range(5)]
    results = run(f, data)
    assert len(results) == 5
    assert all(not r.requires_grad and r.grad_fn is None for r in results)
    print("evidence holds: run() returns 5 eval outputs without autograd graphs")
