# source: placement matrix
# category: DL503
# expect: flag 26
# evidence: after backward the hidden activation's .grad reads None, so the saliency taken from it is missing.
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
score = net.head(torch.tanh(hidden)).sum()
score.backward()
sal = hidden.grad

assert not hidden.is_leaf and hidden.requires_grad
assert sal is None
assert net.body.weight.grad is not None
print("evidence holds: backward ran but the non-leaf activation's .grad is None")
