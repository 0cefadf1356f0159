# source: placement matrix
# category: DL504
# expect: clean
# evidence: fit_head detaches the encoder output, trains the head and leaves the encoder without gradient.
import torch
from torch import nn

torch.manual_seed(0)


def fit_head(enc, lin, sgd, batches):
    for xb, yb in batches:
        z = enc(xb)
        z = z.detach()
        err = ((lin(z) - yb) ** 2).mean()
        sgd.zero_grad()
        err.backward()
        sgd.step()


if __name__ == "__main__":
    enc = nn.Sequential(nn.Linear(3, 5), nn.Tanh())
    lin = nn.Linear(5, 1)
    sgd = torch.optim.SGD(lin.parameters(), lr=0.05)
    batches = [(torch.randn(4, 3), torch.randn(4, 1)) for _ in range(2)]
    try:
        fit_head(enc, lin, sgd, batches)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised is None
    assert lin.weight.grad is not None and enc[0].weight.grad is None
    print("evidence holds: the head trained, the encoder got no gradient, nothing raised")
