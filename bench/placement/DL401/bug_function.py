# source: placement matrix
# category: DL401
# expect: flag 16
# evidence: train() returns `epoch_cost` built with `+=` from each step's loss tensor; it requires grad and its graph holds one AddmmBackward0 per step.
import torch
import torch.nn as nn


def train(f, opt, batches, crit):
    epoch_cost = 0.0
    for inputs, targets in batches:
        opt.zero_grad()
        cost = crit(f(inputs), targets)
        cost.backward()
        opt.step()
        epoch_cost += cost
    return epoch_cost / len(batches)


def count_nodes(root, kind):
    seen, stack = set(), [root]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack.extend(nxt for nxt, _ in node.next_functions)
    return sum(type(n).__name__ == kind for n in seen)


if __name__ == "__main__":
    torch.manual_seed(0)
    f = nn.Linear(4, 1)
    opt = torch.optim.Adam(f.parameters(), lr=0.01)
    data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
    mean_cost = train(f, opt, data, nn.L1Loss())
    assert mean_cost.requires_grad and mean_cost.grad_fn is not None
    alive = count_nodes(mean_cost.grad_fn, "AddmmBackward0")
    assert alive == len(data), alive
    print("evidence holds: accumulator requires grad and keeps all", alive, "step graphs alive")
