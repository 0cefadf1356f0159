# source: placement matrix
# category: DL603
# expect: flag 13
# evidence: the helper returns a TD target computed through the target network with grad on; the caller's backward fills the target network's .grad.
import copy
import torch
from torch import nn

torch.manual_seed(0)


def bootstrap(tgt, r, s2, d, g):
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
    assert all(p.grad is not None for p in tgt.parameters())
    print("evidence holds: the target network received gradients through the helper's target")
