# source: placement matrix
# category: DL401
# expect: flag 29
# evidence: `running += err` keeps a tensor that requires grad, and its graph holds every step's Linear node (one AddmmBackward0 per step) after the loop.
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)


torch.manual_seed(0)
net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
mse = nn.MSELoss()
batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
running = 0.0
for xb, yb in batches:
    opt.zero_grad()
    err = mse(net(xb), yb)
    err.backward()
    opt.step()
    running += err

seen, stack, alive = set(), [running.grad_fn], 0
while stack:
    node = stack.pop()
    if node is None or node in seen:
        continue
    seen.add(node)
    alive += type(node).__name__ == "AddmmBackward0"
    stack.extend(nxt for nxt, _ in node.next_functions)
assert running.requires_grad and running.grad_fn is not None
assert alive == len(batches), alive
print("evidence holds: accumulator requires grad and keeps all", alive, "step graphs alive")
