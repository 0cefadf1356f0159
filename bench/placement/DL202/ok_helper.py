# source: placement matrix
# category: DL202
# expect: clean
# evidence: the helper computes the distillation loss on the live logits, so the caller's backward carries it into the model: weights differ from cross-entropy-only training.
import copy
import torch
from torch import nn


def soft_loss(out, targets_soft, tau):
    return nn.functional.kl_div(nn.functional.log_softmax(out / tau, 1), targets_soft, reduction="batchmean") * tau ** 2


def fit(f, sgd, pairs, tau):
    for xs, ys, ps in pairs:
        sgd.zero_grad()
        out = f(xs)
        j = nn.functional.cross_entropy(out, ys) + soft_loss(out, ps, tau)
        j.backward()
        sgd.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    f = nn.Sequential(nn.Linear(5, 6), nn.ReLU(), nn.Linear(6, 3))
    pairs = [(torch.randn(8, 5), torch.randint(0, 3, (8,)), torch.softmax(torch.randn(8, 3), 1)) for _ in range(3)]
    g = copy.deepcopy(f)
    fit(f, torch.optim.SGD(f.parameters(), lr=0.5), pairs, tau=2.0)
    sgd_g = torch.optim.SGD(g.parameters(), lr=0.5)
    for xs, ys, ps in pairs:
        sgd_g.zero_grad()
        nn.functional.cross_entropy(g(xs), ys).backward()
        sgd_g.step()
    assert not torch.allclose(f[2].weight, g[2].weight), "the soft loss had no effect"
    print("evidence holds: the distillation loss trains the model (weights differ from CE-only training)")
