# source: placement matrix
# category: DL701
# expect: clean
# evidence: the helper returns enc(x) itself; the caller's backward reaches the encoder, which changes.
import torch
from torch import nn


torch.manual_seed(0)


def features(enc, x):
    return enc(x)


def fit(enc, clf, opt, x, y, steps):
    for _ in range(steps):
        l = nn.functional.cross_entropy(clf(features(enc, x)), y)
        opt.zero_grad()
        l.backward()
        opt.step()


if __name__ == "__main__":
    enc, clf = nn.Linear(4, 4), nn.Linear(4, 3)
    opt = torch.optim.SGD([*enc.parameters(), *clf.parameters()], lr=0.1)
    w0 = enc.weight.detach().clone()
    fit(enc, clf, opt, torch.randn(5, 4), torch.randint(0, 3, (5,)), 3)
    assert enc.weight.grad is not None and clf.weight.grad is not None
    assert not torch.equal(enc.weight.detach(), w0)
    print("evidence holds: the encoder received gradients and changed")
