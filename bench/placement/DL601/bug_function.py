# source: placement matrix
# category: DL601
# expect: flag 13, 15, 16
# evidence: train() never zeroes gradients; after the loop .grad holds the sum of every step's gradient and the weights differ from a zeroed replay.
import copy
import torch
import torch.nn as nn

torch.manual_seed(0)


def train(f, sgd, batches):
    for inp, tgt in batches:
        cost = nn.functional.cross_entropy(f(inp), tgt)
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
    assert not torch.allclose(f[2].weight.detach(), twin[2].weight.detach())
    assert f[2].weight.grad.norm().item() > twin[2].weight.grad.norm().item()
    print("evidence holds: gradients accumulated across steps and the weights diverged from a zeroed replay")
