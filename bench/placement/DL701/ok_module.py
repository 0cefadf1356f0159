# source: placement matrix
# category: DL701
# expect: clean
# evidence: without the Variable wrapper the trunk's output stays in the graph; the trunk gets gradients and changes.
import torch
from torch import nn

torch.manual_seed(0)


class Trunk(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 8)

    def forward(self, x):
        return torch.relu(self.fc(x))


trunk = Trunk()
head = nn.Linear(8, 1)
opt = torch.optim.SGD(list(trunk.parameters()) + list(head.parameters()), lr=0.1)
x, y = torch.randn(6, 4), torch.randn(6, 1)
w0 = trunk.fc.weight.detach().clone()
for _ in range(3):
    h = trunk(x)
    pred = head(h)
    loss = ((pred - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()

assert trunk.fc.weight.grad is not None and head.weight.grad is not None
assert not torch.equal(trunk.fc.weight.detach(), w0)
print("evidence holds: the trunk trained together with the head")
