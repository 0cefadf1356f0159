# source: placement matrix
# category: DL401
# expect: clean
# evidence: `hist.setdefault("loss", []).append(loss.item())` keeps Python floats only, so no graph is kept.
import torch
import torch.nn as nn


def fit(model, optimizer, loader, criterion):
    hist = {}
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        hist.setdefault("loss", []).append(loss.item())
    return hist


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = [(torch.randn(4, 3), torch.randint(0, 2, (4,))) for _ in range(3)]
    kept = fit(model, optimizer, loader, nn.CrossEntropyLoss())["loss"]
    assert len(kept) == len(loader) and all(isinstance(v, float) for v in kept)
    print("evidence holds: hist['loss'] holds floats, no graph kept")
