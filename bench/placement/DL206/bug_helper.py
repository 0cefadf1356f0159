# source: placement matrix
# category: DL206
# expect: flag 10
# evidence: the helper's carry.detach() result is thrown away, so the caller gets back the same attached state and the second backward raises "Trying to backward through the graph a second time".
import torch
from torch import nn


def cut(carry):
    carry.detach()
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
        fit(f, g, opt, seq)
    except RuntimeError as e:
        caught = str(e)
    assert caught is not None
    assert "Trying to backward through the graph a second time" in caught
    print("evidence holds: the helper's discarded detach() cut nothing; the caller's backward raises")
