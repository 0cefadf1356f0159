# source: placement matrix
# category: DL401
# expect: clean
# evidence: train() accumulates `cost.item()`, so the returned mean is a Python float and no step's graph is kept.
import torch
import torch.nn as nn


def train(f, opt, batches, crit):
    epoch_cost = 0.0
    for inputs, targets in batches:
        opt.zero_grad()
        cost = crit(f(inputs), targets)
        cost.backward()
        opt.step()
        epoch_cost += cost.item()
    return epoch_cost / len(batches)


if __name__ == "__main__":
    torch.manual_seed(0)
    f = nn.Linear(4, 1)
    opt = torch.optim.Adam(f.parameters(), lr=0.01)
    data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
    mean_cost = train(f, opt, data, nn.L1Loss())
    assert isinstance(mean_cost, float) and mean_cost > 0
    assert all(p.grad is not None for p in f.parameters())
    print("evidence holds: accumulator is a float, no graph kept")
