# source: placement matrix
# category: DL601
# expect: clean
# evidence: gradients are zeroed every step, so the weights match a correctly zeroed replay exactly.
import copy
import torch
from torch import nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 1)

    def forward(self, x):
        return self.fc(x)


net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
batches = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(4)]
start = copy.deepcopy(net.state_dict())
for xb, yb in batches:
    out = net(xb)
    loss = nn.functional.mse_loss(out, yb)
    opt.zero_grad()
    loss.backward()
    opt.step()

ref = Net()
ref.load_state_dict(start)
ref_opt = torch.optim.SGD(ref.parameters(), lr=0.1)
for xb, yb in batches:
    ref_opt.zero_grad()
    nn.functional.mse_loss(ref(xb), yb).backward()
    ref_opt.step()
assert torch.allclose(net.fc.weight.detach(), ref.fc.weight.detach())
assert torch.allclose(net.fc.weight.grad, ref.fc.weight.grad)
print("evidence holds: the weights and last gradient match a zeroed replay")
