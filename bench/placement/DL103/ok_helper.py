# source: placement matrix
# category: DL103
# expect: clean
# evidence: the helper reads the 0-dim loss with .item(), so fit() runs every step and logs plain floats.
import torch
from torch import nn


def scalar(t):
    return t.item()


def fit(f, sgd, pairs):
    log = []
    for xs, ys in pairs:
        sgd.zero_grad()
        l = nn.functional.mse_loss(f(xs), ys)
        l.backward()
        sgd.step()
        log.append(scalar(l))
    return log


if __name__ == "__main__":
    torch.manual_seed(0)
    f = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    pairs = [(torch.randn(8, 3), torch.randn(8, 1)) for _ in range(3)]
    try:
        log = fit(f, torch.optim.SGD(f.parameters(), lr=0.05), pairs)
        raised = None
    except IndexError as exc:
        raised = exc
    assert raised is None, raised
    assert len(log) == 3 and all(isinstance(v, float) for v in log)
    print("evidence holds: .item() read every loss as a float")
