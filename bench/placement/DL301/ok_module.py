# source: placement matrix
# category: DL301
# expect: clean
# evidence: after net.eval() the prediction loop runs under torch.no_grad(), so no collected output carries a grad_fn and no graph is kept.
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
with torch.no_grad():
    for xb in batches:
        outs.append(net(xb))

assert len(outs) == 5
assert all(not o.requires_grad and o.grad_fn is None for o in outs)
print("evidence holds: all 5 eval outputs are free of autograd graphs")
