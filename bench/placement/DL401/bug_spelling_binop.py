# source: placement matrix
# category: DL401
# expect: flag 19
# evidence: `total = total + loss` (never backpropagated) leaves `total` requiring grad, with one AddmmBackward0 per step still reachable from it.
import torch
import torch.nn as nn

torch.manual_seed(0)
model = nn.Linear(3, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
criterion = nn.MSELoss()
loader = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)]
total = 0
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    total = total + loss
avg = total / len(loader)

assert avg.requires_grad and avg.grad_fn is not None
seen, stack = set(), [avg.grad_fn]
while stack:
    node = stack.pop()
    if node is not None and node not in seen:
        seen.add(node)
        stack.extend(nxt for nxt, _ in node.next_functions)
alive = sum(type(n).__name__ == "AddmmBackward0" for n in seen)
assert alive == len(loader), alive
print("evidence holds: total requires grad and keeps all", alive, "step graphs alive")
