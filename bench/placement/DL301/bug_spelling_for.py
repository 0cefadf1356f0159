# source: placement matrix
# category: DL301
# expect: flag 26, 27
# evidence: the evaluation loop written as a `for` loop collecting predictions after `net.eval()` runs over 5 batches with grad mode on, so every prediction carries a grad_fn and keeps its autograd graph alive.
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
for xb in batches:
    logits = net(xb)
    preds.append(logits.softmax(dim=-1))

assert len(preds) == 5
assert all(p.requires_grad and p.grad_fn is not None for p in preds)
print("evidence holds: [for] all 5 eval predictions carry a grad_fn")
