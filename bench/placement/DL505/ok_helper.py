# source: placement matrix
# category: DL505
# expect: clean
# evidence: the helper computes the loss with torch ops; the model gets gradients and changes.
import numpy as np
import torch

torch.manual_seed(0)


def l1_error(p, t):
    return (p - t).abs().mean()


def fit(m, opt, xs, ys, steps):
    for _ in range(steps):
        l = l1_error(m(xs), ys)
        opt.zero_grad()
        l.backward()
        opt.step()


if __name__ == "__main__":
    m = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    w0 = m.weight.detach().clone()
    fit(m, opt, torch.randn(7, 3), torch.randn(7, 2), 3)
    assert m.weight.grad is not None
    assert not torch.equal(m.weight.detach(), w0)
    assert np.isfinite(m.weight.detach().numpy()).all()
    print("evidence holds: the weights got gradients and changed")
