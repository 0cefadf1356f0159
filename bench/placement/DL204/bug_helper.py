# source: placement matrix
# category: DL204
# expect: flag 10
# evidence: the caller passes a detached alias of the sigmoid output to a helper that scales it in place, so the caller's backward raises "one of the variables needed for gradient computation has been modified by an inplace operation".
import torch
from torch import nn


def to_percent(t):
    t.mul_(100)
    return t.mean().item()


def fit(f, opt, batches):
    levels = []
    for xb, yb in batches:
        opt.zero_grad()
        p = torch.sigmoid(f(xb))
        view = p.detach()
        levels.append(to_percent(view))
        gap = ((p - yb) ** 2).mean()
        gap.backward()
        opt.step()
    return levels


if __name__ == "__main__":
    torch.manual_seed(0)
    f = nn.Linear(3, 1)
    opt = torch.optim.SGD(f.parameters(), lr=0.1)
    batches = [(torch.randn(4, 3), torch.rand(4, 1)) for _ in range(3)]
    w0 = f.weight.detach().clone()
    caught = None
    try:
        fit(f, opt, batches)
    except RuntimeError as e:
        caught = str(e)
    assert caught is not None and "modified by an inplace operation" in caught
    assert torch.equal(f.weight.detach(), w0)
    print("evidence holds: the helper's in-place edit of the detached alias breaks the caller's backward")
