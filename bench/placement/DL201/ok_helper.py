# source: placement matrix
# category: DL201
# expect: clean
# evidence: the helper returns the embedding uncut, so the caller's backward reaches the embedder's parameters and Adam moves them.
import itertools
import torch
from torch import nn


def embed(g, xs):
    return g(xs)


def fit(g, top, upd, pairs):
    for xs, ys in pairs:
        upd.zero_grad()
        e = embed(g, xs)
        nn.functional.cross_entropy(top(e), ys).backward()
        upd.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    g = nn.Sequential(nn.Linear(6, 6), nn.GELU(), nn.Linear(6, 4))
    top = nn.Linear(4, 3)
    upd = torch.optim.Adam(itertools.chain(g.parameters(), top.parameters()), lr=0.01)
    pairs = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(3)]
    g0 = [p.detach().clone() for p in g.parameters()]
    fit(g, top, upd, pairs)
    assert all(p.grad is not None for p in g.parameters())
    assert not any(torch.equal(p, q) for p, q in zip(g.parameters(), g0)), "embedder frozen"
    assert top.weight.grad is not None
    print("evidence holds: gradients reach the embedder and Adam trains it")
