# source: placement matrix
# category: DL302
# expect: clean
# evidence: the helper computes the loss with grad mode on, so the caller's backward succeeds, g gets gradients and Adam moves its weights.
import torch
from torch import nn


def score(g, xb, yb):
    out = g(xb)
    return ((out - yb) ** 2).mean()


def fit(g, adam, batches):
    for xb, yb in batches:
        adam.zero_grad()
        value = score(g, xb, yb)
        value.backward()
        adam.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    g = nn.Linear(3, 1)
    adam = torch.optim.Adam(g.parameters(), lr=0.01)
    batches = [(torch.randn(6, 3), torch.randn(6, 1)) for _ in range(3)]
    w0 = g.weight.detach().clone()
    caught = None
    try:
        fit(g, adam, batches)
    except RuntimeError as e:
        caught = str(e)
    assert caught is None
    assert g.weight.grad is not None
    assert not torch.equal(g.weight.detach(), w0)
    print("evidence holds: the helper's loss backpropagates into g and its weights change")
