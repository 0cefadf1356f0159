# source: placement matrix
# category: DL101
# expect: clean
# evidence: the helper clamps out of place, so the caller's backward differentiates the clamp and the trained weights equal the visible-clamp reference.
import copy
import torch
from torch import nn


def squash(g, xs):
    q = torch.sigmoid(g(xs))
    q = q.clamp(0.05, 0.95)
    return q


def fit(g, upd, pairs):
    for xs, ys in pairs:
        upd.zero_grad()
        q = squash(g, xs)
        nn.functional.binary_cross_entropy(q, ys).backward()
        upd.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    g = nn.Linear(4, 1)
    pairs = [(torch.randn(16, 4) * 3, torch.randint(0, 2, (16, 1)).float()) for _ in range(3)]
    base = copy.deepcopy(g)
    fit(g, torch.optim.SGD(g.parameters(), lr=0.5), pairs)
    base_upd = torch.optim.SGD(base.parameters(), lr=0.5)
    for xs, ys in pairs:
        base_upd.zero_grad()
        nn.functional.binary_cross_entropy(torch.sigmoid(base(xs)).clamp(0.05, 0.95), ys).backward()
        base_upd.step()
    same = all(torch.allclose(a, b) for a, b in zip(g.parameters(), base.parameters()))
    assert same, "weights differ from the reference training"
    print("evidence holds: gradients are those of the computed loss (weights equal the visible-clamp run)")
