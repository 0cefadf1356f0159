# source: placement matrix
# category: DL603
# expect: clean
# evidence: the helper computes the TD target under no_grad; the target network's .grad stays None.
import copy
import torch
from torch import nn

torch.manual_seed(0)


def bootstrap(tgt, r, s2, d, g):
    with torch.no_grad():
        return r + g * (1 - d) * tgt(s2).max(1).values


def update(net, tgt, opt, s, a, r, s2, d):
    y = bootstrap(tgt, r, s2, d, 0.99)
    q = net(s).gather(1, a.view(-1, 1)).view(-1)
    l = nn.functional.huber_loss(q, y)
    opt.zero_grad()
    l.backward()
    opt.step()


if __name__ == "__main__":
    net = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
    tgt = copy.deepcopy(net)
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    update(net, tgt, opt, torch.randn(5, 2), torch.randint(0, 2, (5,)), torch.randn(5), torch.randn(5, 2), torch.zeros(5))
    assert all(p.grad is None for p in tgt.parameters())
    assert net[0].weight.grad is not None
    print("evidence holds: only the online network received gradients")
