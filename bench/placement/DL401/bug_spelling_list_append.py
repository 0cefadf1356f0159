# source: placement matrix
# category: DL401
# expect: flag 19
# evidence: `losses.append(loss)` after each step's backward keeps every loss tensor with its grad_fn, one AddmmBackward0 per step still reachable.
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(3, 1)
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
criterion = nn.L1Loss()
loader = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(3)]
losses = []
for x, y in loader:
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    losses.append(loss)

assert all(t.requires_grad and t.grad_fn is not None for t in losses)
seen, stack = set(), [t.grad_fn for t in losses]
while stack:
    node = stack.pop()
    if node is not None and node not in seen:
        seen.add(node)
        stack.extend(nxt for nxt, _ in node.next_functions)
alive = sum(type(n).__name__ == "AddmmBackward0" for n in seen)
assert alive == len(loader), alive
print("evidence holds: losses list keeps all", alive, "step graphs alive")
