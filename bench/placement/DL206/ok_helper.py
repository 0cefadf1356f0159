# source: placement matrix
# category: DL206
# expect: clean
# evidence: the helper rebinds carry to its detached copy and returns it, so each step of the caller backpropagates through its own graph and all four steps run.
import torch
from torch import nn


def cut(carry):
    carry = carry.detach()
    return carry


def fit(f, g, opt, seq):
    carry = torch.zeros(2, 4)
    for xb, yb in seq:
        carry = f(xb, carry)
        gap = ((g(carry) - yb) ** 2).mean()
        opt.zero_grad()
        gap.backward()
        opt.step()
        carry = cut(carry)
    return carry


if __name__ == "__main__":
    torch.manual_seed(0)
    f = nn.RNNCell(3, 4)
    g = nn.Linear(4, 1)
    opt = torch.optim.SGD(list(f.parameters()) + list(g.parameters()), lr=0.1)
    seq = [(torch.randn(2, 3), torch.randn(2, 1)) for _ in range(4)]
    caught = None
    try:
        last = fit(f, g, opt, seq)
    except RuntimeError as e:
        caught = str(e)
    assert caught is None and last.grad_fn is None
    assert f.weight_hh.grad is not None
    print("evidence holds: the helper returns a cut state; every step of fit() runs")
