# source: placement matrix
# category: DL301
# expect: clean
# evidence: the evaluation loop written as `list(map(net, batches))` after `net.eval()` runs over 5 batches under torch.inference_mode(), so no prediction carries a grad_fn.
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
with torch.inference_mode():
    preds = list(map(net, batches))

assert len(preds) == 5
assert all(not p.requires_grad and p.grad_fn is None for p in preds)
print("evidence holds: [map] all 5 eval predictions are free of autograd graphs")
