# source: placement matrix
# category: DL502
# expect: flag 14
# evidence: train() updates each weight in place with `w -= step_size * w.grad` outside no_grad and raises "a leaf Variable that requires grad is being used in an in-place operation"; weights stay unchanged.
import torch
import torch.nn as nn


def train(f, batches, crit, step_size):
    for inputs, targets in batches:
        f.zero_grad()
        crit(f(inputs), targets).backward()
        for w in f.parameters():
            w -= step_size * w.grad


if __name__ == "__main__":
    torch.manual_seed(0)
    f = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1))
    data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
    before = [p.detach().clone() for p in f.parameters()]
    try:
        train(f, data, nn.L1Loss(), 0.05)
        raised = None
    except RuntimeError as exc:
        raised = str(exc)
    assert raised is not None and "a leaf Variable that requires grad" in raised, raised
    assert all(torch.equal(b, p.detach()) for b, p in zip(before, f.parameters()))
    print("evidence holds: in-place update of a parameter outside no_grad raises, weights unchanged")
