# source: placement matrix
# category: DL301
# expect: flag 26, 27
# evidence: after net.eval() the prediction loop runs with grad mode on, so every collected output carries a grad_fn and keeps its autograd graph alive.
import torch
from torch import nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 8)
        self.drop = nn.Dropout(0.5)
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc2(self.drop(torch.relu(self.fc1(x))))


net = Net()
batches = [torch.randn(4, 3) for _ in range(5)]
net.eval()
outs = []
for xb in batches:
    outs.append(net(xb))

assert len(outs) == 5
assert all(o.requires_grad and o.grad_fn is not None for o in outs)
print("evidence holds: all 5 eval outputs carry a grad_fn (graphs kept alive)")
