# source: placement matrix
# category: DL205
# expect: clean
# evidence: the helper returns a detached copy, so the caller's activation stays in the graph and the encoder gets gradients through k(code) and changes.
import torch
from torch import nn


def stop_grad(t):
    return t.detach()


def fit(g, k, opt, batches):
    for xb in batches:
        opt.zero_grad()
        code = g(xb)
        ref = stop_grad(code)
        rebuilt = k(code)
        gap = ((rebuilt - ref) ** 2).mean()
        gap.backward()
        opt.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    g = nn.Linear(3, 4)
    k = nn.Linear(4, 4)
    opt = torch.optim.SGD(list(g.parameters()) + list(k.parameters()), lr=0.1)
    batches = [torch.randn(5, 3) for _ in range(3)]
    w0 = g.weight.detach().clone()
    fit(g, k, opt, batches)
    assert g.weight.grad is not None and k.weight.grad is not None
    assert not torch.equal(g.weight.detach(), w0)
    print("evidence holds: the helper's detach() leaves the caller's graph intact; g changes")
