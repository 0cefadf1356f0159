# source: placement matrix
# category: DL505
# expect: clean
# evidence: train() computes the loss with torch ops; every parameter gets a gradient and moves.
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(0)


def train(f, sgd, batches):
    for inp, tgt in batches:
        out = f(inp)
        cost = (out - tgt).abs().mean()
        sgd.zero_grad()
        cost.backward()
        sgd.step()


if __name__ == "__main__":
    f = nn.Sequential(nn.Linear(2, 4), nn.ReLU(), nn.Linear(4, 1))
    sgd = torch.optim.SGD(f.parameters(), lr=0.1)
    batches = [(torch.randn(5, 2), torch.randn(5, 1)) for _ in range(3)]
    start = [p.detach().clone() for p in f.parameters()]
    train(f, sgd, batches)
    assert all(p.grad is not None for p in f.parameters())
    assert not torch.equal(f[2].weight.detach(), start[2])
    assert np.isfinite(f[2].weight.detach().numpy()).all()
    print("evidence holds: the parameters got gradients and moved")
