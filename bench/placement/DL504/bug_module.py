# source: placement matrix
# category: DL504
# expect: flag 27
# evidence: setting requires_grad = False on the backbone's output raises "you can only change requires_grad flags of leaf variables".
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
    feats.requires_grad = False
    loss = nn.functional.cross_entropy(probe(feats), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
except RuntimeError as e:
    error = e

assert error is not None
assert "you can only change requires_grad flags of leaf variables" in str(error)
print("evidence holds: the linear-probe step raised on requires_grad = False of a non-leaf")
