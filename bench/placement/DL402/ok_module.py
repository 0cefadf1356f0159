# source: placement matrix
# category: DL402
# expect: clean
# evidence: `pred.detach().cpu().numpy()` converts the network's output without error on every step.
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
        arr = pred.detach().cpu().numpy()
        gaps.append(abs(arr - yb.numpy()).mean())
except RuntimeError as exc:
    error = str(exc)

assert error is None, error
assert len(gaps) == len(batches)
print("evidence holds: .detach().cpu().numpy() converts without error")
