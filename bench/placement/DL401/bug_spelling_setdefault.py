# source: placement matrix
# category: DL401
# expect: flag 16
# evidence: `hist.setdefault("loss", []).append(loss)` keeps every step's loss tensor with its grad_fn, one AddmmBackward0 per step still reachable.
import torch
import torch.nn as nn


def fit(model, optimizer, loader, criterion):
    hist = {}
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        hist.setdefault("loss", []).append(loss)
    return hist


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = [(torch.randn(4, 3), torch.randint(0, 2, (4,))) for _ in range(3)]
    kept = fit(model, optimizer, loader, nn.CrossEntropyLoss())["loss"]
    assert all(t.requires_grad and t.grad_fn is not None for t in kept)
    seen, stack = set(), [t.grad_fn for t in kept]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack.extend(nxt for nxt, _ in node.next_functions)
    alive = sum(type(n).__name__ == "AddmmBackward0" for n in seen)
    assert alive == len(loader), alive
    print("evidence holds: hist['loss'] keeps all", alive, "step graphs alive")
