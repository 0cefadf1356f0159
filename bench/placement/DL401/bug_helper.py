# source: placement matrix
# category: DL401
# expect: flag 20
# evidence: the helper returns the step's loss tensor and the caller sums it with `+=`; the sum requires grad and holds one AddmmBackward0 per step.
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
        total += train_step(m, stepper, batch, label, score_fn)
    return total


if __name__ == "__main__":
    torch.manual_seed(0)
    head = nn.Linear(4, 3)
    momentum_sgd = torch.optim.SGD(head.parameters(), lr=0.1, momentum=0.9)
    pairs = [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(3)]
    total = fit(head, momentum_sgd, pairs, nn.CrossEntropyLoss())
    assert total.requires_grad and total.grad_fn is not None
    seen, stack = set(), [total.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack.extend(nxt for nxt, _ in node.next_functions)
    alive = sum(type(n).__name__ == "AddmmBackward0" for n in seen)
    assert alive == len(pairs), alive
    print("evidence holds: caller's sum requires grad and keeps all", alive, "step graphs alive")
