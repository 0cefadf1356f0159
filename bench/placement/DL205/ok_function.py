# source: placement matrix
# category: DL205
# expect: clean
# evidence: inside train() h.detach() makes a stop-gradient copy for the goal while h stays in the graph, so every trunk parameter gets a gradient and changes.
import torch
import torch.nn as nn


def train(trunk, proj, sgd, batches):
    for inp in batches:
        sgd.zero_grad()
        h = trunk(inp)
        goal = h.detach()
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
    assert all(p.grad is not None for p in trunk.parameters())
    assert proj.weight.grad is not None
    assert not torch.equal(trunk[0].weight.detach(), first)
    print("evidence holds: with detach() the trunk still gets gradients and changes")
