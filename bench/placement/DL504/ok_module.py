# source: placement matrix
# category: DL504
# expect: clean
# evidence: detaching the backbone's output trains the probe while the backbone gets no gradient.
import torch
import torch.nn as nn

torch.manual_seed(0)


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 8)

    def forward(self, x):
        return torch.relu(self.fc(x))


backbone = Backbone()
probe = nn.Linear(8, 2)
opt = torch.optim.SGD(probe.parameters(), lr=0.1)
x, y = torch.randn(6, 4), torch.randint(0, 2, (6,))
error = None
try:
    feats = backbone(x)
    feats = feats.detach()
    loss = nn.functional.cross_entropy(probe(feats), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
except RuntimeError as e:
    error = e

assert error is None
assert probe.weight.grad is not None and backbone.fc.weight.grad is None
print("evidence holds: the probe trained and the backbone was kept out of the graph")
