# source: placement matrix
# category: DL401
# expect: clean
# evidence: `losses.append(loss.item())` after each step keeps Python floats only, so no graph is kept.
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
    losses.append(loss.item())

assert len(losses) == len(loader) and all(isinstance(v, float) for v in losses)
print("evidence holds: losses list holds floats, no graph kept")
