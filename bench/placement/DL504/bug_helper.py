# source: placement matrix
# category: DL504
# expect: flag 12
# evidence: the helper sets requires_grad = False on the encoder output it is given, which raises "you can only change requires_grad flags of leaf variables".
import torch
from torch import nn

torch.manual_seed(0)


def frozen(t):
    t.requires_grad = False
    return t


def train_readout(body, readout, opt, xs, ys):
    emb = frozen(body(xs))
    l = nn.functional.mse_loss(readout(emb), ys)
    opt.zero_grad()
    l.backward()
    opt.step()


if __name__ == "__main__":
    body, readout = nn.Linear(2, 4), nn.Linear(4, 1)
    opt = torch.optim.SGD(readout.parameters(), lr=0.1)
    try:
        train_readout(body, readout, opt, torch.randn(3, 2), torch.randn(3, 1))
        err = None
    except RuntimeError as e:
        err = e
    assert err is not None and "only change requires_grad flags of leaf variables" in str(err)
    print("evidence holds: the helper raised on requires_grad = False of a non-leaf")
