# source: placement matrix
# category: DL301
# expect: clean
# evidence: the evaluation loop written as a `for` loop collecting predictions after `net.eval()` runs over 5 batches under torch.no_grad(), so no prediction carries a grad_fn.
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
net.eval()
batches = [torch.randn(4, 3) for _ in range(5)]
preds = []
with torch.no_grad():
    for xb in batches:
        logits = net(xb)
        preds.append(logits.softmax(dim=-1))

assert len(preds) == 5
assert all(not p.requires_grad and p.grad_fn is None for p in preds)
print("evidence holds: [for] all 5 eval predictions are free of autograd graphs")
