# source: placement matrix
# category: DL505
# expect: flag 18
# evidence: the helper returns a loss built in numpy, the caller forces requires_grad on it; the model gets no gradient and never changes.
import numpy as np
import torch

torch.manual_seed(0)


def l1_error(p, t):
    return torch.tensor(np.abs(p.detach().numpy() - t.numpy()).mean())


def fit(m, opt, xs, ys, steps):
    for _ in range(steps):
        l = l1_error(m(xs), ys)
        l.requires_grad = True
        opt.zero_grad()
        l.backward()
        opt.step()


if __name__ == "__main__":
    m = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    w0 = m.weight.detach().clone()
    fit(m, opt, torch.randn(7, 3), torch.randn(7, 2), 3)
    assert m.weight.grad is None
    assert torch.equal(m.weight.detach(), w0)
    print("evidence holds: fit ran three steps and the weights never changed")
