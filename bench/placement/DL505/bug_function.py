# source: placement matrix
# category: DL505
# expect: flag 17
# evidence: train() forces requires_grad on a loss built from numpy; the steps run and no parameter receives a gradient.
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)


def train(f, sgd, batches):
    for inp, tgt in batches:
        out = f(inp)
        err = np.abs(out.detach().numpy() - tgt.numpy()).mean()
        cost = torch.tensor(err)
        cost.requires_grad = True
        sgd.zero_grad()
        cost.backward()
        sgd.step()


if __name__ == "__main__":
    f = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1))
    sgd = torch.optim.SGD(f.parameters(), lr=0.1)
    batches = [(torch.randn(5, 2), torch.randn(5, 1)) for _ in range(3)]
    start = [p.detach().clone() for p in f.parameters()]
    train(f, sgd, batches)
    assert all(p.grad is None for p in f.parameters())
    assert all(torch.equal(p.detach(), s) for p, s in zip(f.parameters(), start))
    print("evidence holds: training ran and no parameter got a gradient or moved")
