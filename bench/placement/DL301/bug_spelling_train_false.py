# source: placement matrix
# category: DL301
# expect: flag 26, 27
# evidence: with eval mode set by `net.train(False)`, the evaluation loop over 5 batches runs with grad mode on, so every prediction carries a grad_fn and keeps its autograd graph alive.
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
net.train(False)
batches = [torch.randn(4, 3) for _ in range(5)]
preds = []
for xb in batches:
    preds.append(net(xb))

assert len(preds) == 5
assert all(p.requires_grad and p.grad_fn is not None for p in preds)
print("evidence holds: [train_false] all 5 eval predictions carry a grad_fn")
