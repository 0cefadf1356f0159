# source: placement matrix
# category: DL303
# expect: clean
# evidence: train() computes the prediction with grad enabled, so backward reaches every parameter and opt.step() changes the weights.
import torch
import torch.nn as nn


def train(f, opt, batches, crit):
    for inputs, targets in batches:
        opt.zero_grad()
        y_hat = f(inputs)
        cost = crit(y_hat, targets)
        cost.backward()
        opt.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    f = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 1))
    opt = torch.optim.Adam(f.parameters(), lr=0.01)
    data = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
    before = [p.detach().clone() for p in f.parameters()]
    try:
        train(f, opt, data, nn.L1Loss())
        raised = None
    except RuntimeError as exc:
        raised = str(exc)
    assert raised is None, raised
    assert all(p.grad is not None for p in f.parameters())
    assert all(not torch.equal(b, p.detach()) for b, p in zip(before, f.parameters()))
    print("evidence holds: forward with grad -> gradients reach parameters, weights change")
