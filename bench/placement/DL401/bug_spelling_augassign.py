# source: placement matrix
# category: DL401
# expect: flag 18
# evidence: `total += loss` inside the epoch loop leaves `total` requiring grad, with one AddmmBackward0 per step still reachable from it.
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
            total += loss
        history.append(total)
    return history


if __name__ == "__main__":
    torch.manual_seed(0)
    net = nn.Linear(3, 1)
    sgd = torch.optim.SGD(net.parameters(), lr=0.05)
    loader = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)]
    last = run(net, sgd, loader, nn.MSELoss(), epochs=2)[-1]
    assert last.requires_grad and last.grad_fn is not None
    seen, stack = set(), [last.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack.extend(nxt for nxt, _ in node.next_functions)
    alive = sum(type(n).__name__ == "AddmmBackward0" for n in seen)
    assert alive == len(loader), alive
    print("evidence holds: total requires grad and keeps all", alive, "step graphs of the epoch alive")
