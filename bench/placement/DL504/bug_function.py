# source: placement matrix
# category: DL504
# expect: flag 14
# evidence: fit_head raises "you can only change requires_grad flags of leaf variables" on the encoder output.
import torch
from torch import nn

torch.manual_seed(0)


def fit_head(enc, lin, sgd, batches):
    for xb, yb in batches:
        z = enc(xb)
        z.requires_grad = False
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
    assert raised is not None and "only change requires_grad flags of leaf variables" in raised
    print("evidence holds: the step raised on requires_grad = False of a non-leaf")
