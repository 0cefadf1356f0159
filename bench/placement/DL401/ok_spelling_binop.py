# source: placement matrix
# category: DL401
# expect: clean
# evidence: `total = total + loss.item()` accumulates a Python float, so no graph is kept.
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
    total = total + loss.item()
avg = total / len(loader)

assert isinstance(avg, float) and avg > 0
print("evidence holds: total is a float, no graph kept")
