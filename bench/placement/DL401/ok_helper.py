# source: placement matrix
# category: DL401
# expect: clean
# evidence: the caller sums `.item()` of the helper's loss, so the total is a Python float holding no graph.
import torch
from torch import nn


def train_step(m, stepper, batch, label, score_fn):
    stepper.zero_grad()
    value = score_fn(m(batch), label)
    value.backward()
    stepper.step()
    return value


def fit(m, stepper, pairs, score_fn):
    total = 0
    for batch, label in pairs:
        total += train_step(m, stepper, batch, label, score_fn).item()
    return total


if __name__ == "__main__":
    torch.manual_seed(0)
    head = nn.Linear(4, 3)
    momentum_sgd = torch.optim.SGD(head.parameters(), lr=0.1, momentum=0.9)
    pairs = [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(3)]
    total = fit(head, momentum_sgd, pairs, nn.CrossEntropyLoss())
    assert isinstance(total, float) and total > 0
    assert all(p.grad is not None for p in head.parameters())
    print("evidence holds: caller's sum is a float, no graph kept")
