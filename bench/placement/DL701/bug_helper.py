# source: placement matrix
# category: DL701
# expect: flag 14
# evidence: the helper returns Variable(enc(x)), a detached copy; the caller's backward and step never reach the encoder.
import torch
from torch import nn
from torch.autograd import Variable


torch.manual_seed(0)


def features(enc, x):
    return Variable(enc(x))


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
    assert enc.weight.grad is None and clf.weight.grad is not None
    assert torch.equal(enc.weight.detach(), w0)
    print("evidence holds: the encoder stepped by the optimizer never changed")
