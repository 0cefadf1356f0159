# source: placement matrix
# category: DL503
# expect: clean
# evidence: retain_grad() on the hidden activation makes its .grad hold the saliency after backward.
import torch
from torch import nn

torch.manual_seed(0)


class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 8)
        self.head = nn.Linear(8, 1)

    def forward(self, x):
        return self.head(torch.tanh(self.body(x)))


net = Probe()
x = torch.randn(3, 4)
hidden = net.body(x)
hidden.retain_grad()
score = net.head(torch.tanh(hidden)).sum()
score.backward()
sal = hidden.grad

assert not hidden.is_leaf and hidden.requires_grad
assert sal is not None and sal.shape == hidden.shape
assert sal.abs().sum().item() > 0
print("evidence holds: the retained non-leaf activation's .grad is populated")
