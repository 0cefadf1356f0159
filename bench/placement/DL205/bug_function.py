# source: placement matrix
# category: DL205
# expect: flag 13
# evidence: inside train() h.detach_() cuts h itself, so the projection's prediction from h no longer reaches the trunk: every trunk parameter keeps grad None although sgd steps it.
import torch
import torch.nn as nn


def train(trunk, proj, sgd, batches):
    for inp in batches:
        sgd.zero_grad()
        h = trunk(inp)
        goal = h.detach_()
        guess = proj(h)
        cost = ((guess - goal) ** 2).mean()
        cost.backward()
        sgd.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    trunk = nn.Sequential(nn.Linear(3, 4), nn.Tanh())
    proj = nn.Linear(4, 4)
    sgd = torch.optim.SGD([*trunk.parameters(), *proj.parameters()], lr=0.1)
    data = [torch.randn(5, 3) for _ in range(3)]
    first = trunk[0].weight.detach().clone()
    train(trunk, proj, sgd, data)
    assert all(p.grad is None for p in trunk.parameters())
    assert proj.weight.grad is not None
    assert torch.equal(trunk[0].weight.detach(), first)
    print("evidence holds: after detach_() in train() the trunk gets no gradient and never changes")
