# source: placement matrix
# category: DL603
# expect: flag 28
# evidence: the TD target is computed through the target network with grad on, so backward fills the target network's .grad.
import copy
import torch
import torch.nn as nn

torch.manual_seed(0)


class QNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2))

    def forward(self, s):
        return self.mlp(s)


q_net = QNet()
target_net = copy.deepcopy(q_net)
opt = torch.optim.Adam(q_net.parameters(), lr=1e-3)
gamma = 0.99
s, a, r = torch.randn(5, 4), torch.randint(0, 2, (5,)), torch.randn(5)
s2, done = torch.randn(5, 4), torch.zeros(5)
q = q_net(s).gather(1, a.unsqueeze(1)).squeeze(1)
target = r + gamma * (1 - done) * target_net(s2).max(1).values
loss = nn.functional.smooth_l1_loss(q, target)
opt.zero_grad()
loss.backward()
opt.step()

assert target.requires_grad
assert all(p.grad is not None for p in target_net.parameters())
print("evidence holds: gradients leaked into the target network")
