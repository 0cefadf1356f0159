# source: placement matrix
# category: DL401
# expect: clean
# evidence: `total += loss.detach()` accumulates a tensor with no grad_fn, so no step's graph is kept.
import torch
from torch import nn


def run(net, sgd, loader, lossf, epochs):
    history = []
    for _ in range(epochs):
        total = 0.0
        for xb, yb in loader:
            sgd.zero_grad()
            loss = lossf(net(xb), yb)
            loss.backward()
            sgd.step()
            total += loss.detach()
        history.append(total)
    return history


if __name__ == "__main__":
    torch.manual_seed(0)
    net = nn.Linear(3, 1)
    sgd = torch.optim.SGD(net.parameters(), lr=0.05)
    loader = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)]
    last = run(net, sgd, loader, nn.MSELoss(), epochs=2)[-1]
    assert not last.requires_grad and last.grad_fn is None
    assert last.item() > 0
    print("evidence holds: total has no grad_fn, no graph kept")
