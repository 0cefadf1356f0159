# source: placement matrix
# category: DL205
# expect: flag 10
# evidence: the helper calls t.detach_() on the caller's activation, which cuts the caller's code too, so the encoder gets no gradient (grad None) although the optimizer steps it.
import torch
from torch import nn


def stop_grad(t):
    return t.detach_()


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
    assert g.weight.grad is None and k.weight.grad is not None
    assert torch.equal(g.weight.detach(), w0)
    print("evidence holds: the helper's detach_() cut the caller's activation; g never changes")
