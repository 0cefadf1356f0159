# source: placement matrix
# category: DL202
# expect: flag 11
# evidence: the helper computes the distillation loss on detached logits and the caller adds it to the loss it backpropagates, so the term adds no gradient: weights equal cross-entropy-only training.
import copy
import torch
from torch import nn


def soft_loss(out, targets_soft, tau):
    return nn.functional.kl_div(nn.functional.log_softmax(out.detach() / tau, 1), targets_soft, reduction="batchmean") * tau ** 2


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
    assert all(torch.allclose(a, b) for a, b in zip(f.parameters(), g.parameters())), "the soft loss had an effect"
    print("evidence holds: the distillation loss on detached logits changed nothing (weights equal CE-only training)")
