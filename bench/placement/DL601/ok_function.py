# source: placement matrix
# category: DL601
# expect: clean
# evidence: train() zeroes gradients each step; the weights match a zeroed replay exactly.
import copy
import torch
import torch.nn as nn

torch.manual_seed(0)


def train(f, sgd, batches):
    for inp, tgt in batches:
        cost = nn.functional.cross_entropy(f(inp), tgt)
        sgd.zero_grad()
        cost.backward()
        sgd.step()


def replay(f, batches):
    g = torch.optim.SGD(f.parameters(), lr=0.05)
    for inp, tgt in batches:
        g.zero_grad()
        nn.functional.cross_entropy(f(inp), tgt).backward()
        g.step()


if __name__ == "__main__":
    f = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
    batches = [(torch.randn(5, 4), torch.randint(0, 3, (5,))) for _ in range(4)]
    twin = copy.deepcopy(f)
    train(f, torch.optim.SGD(f.parameters(), lr=0.05), batches)
    replay(twin, batches)
    assert torch.allclose(f[2].weight.detach(), twin[2].weight.detach())
    assert torch.allclose(f[2].weight.grad, twin[2].weight.grad)
    print("evidence holds: the weights and gradients match a zeroed replay")
