# source: placement matrix
# category: DL402
# expect: flag 32
# evidence: `pred.numpy()` on the network's output raises "Can't call numpy() on Tensor that requires grad".
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)


torch.manual_seed(0)
net = Net()
sgd = torch.optim.SGD(net.parameters(), lr=0.1)
mse = nn.MSELoss()
batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
gaps = []
error = None
try:
    for xb, yb in batches:
        sgd.zero_grad()
        pred = net(xb)
        err = mse(pred, yb)
        err.backward()
        sgd.step()
        arr = pred.numpy()
        gaps.append(abs(arr - yb.numpy()).mean())
except RuntimeError as exc:
    error = str(exc)

assert error is not None and "Can't call numpy() on Tensor that requires grad" in error, error
assert gaps == []
print("evidence holds: .numpy() on a tensor that requires grad raises")
