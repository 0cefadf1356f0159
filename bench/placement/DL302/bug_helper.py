# source: placement matrix
# category: DL302
# expect: flag 18, 19
# evidence: the helper computes the loss under @torch.no_grad(), so the caller's backward raises "element 0 of tensors does not require grad and does not have a grad_fn" and g never changes.
import torch
from torch import nn


@torch.no_grad()
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
    assert caught is not None
    assert "element 0 of tensors does not require grad and does not have a grad_fn" in caught
    assert torch.equal(g.weight.detach(), w0)
    print("evidence holds: backward on a loss the helper built under no_grad raises; weights unchanged")
