# source: placement matrix
# category: DL504
# expect: clean
# evidence: the helper detaches the encoder output; the readout trains and the body gets no gradient.
import torch
from torch import nn

torch.manual_seed(0)


def frozen(t):
    t = t.detach()
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
    assert err is None
    assert readout.weight.grad is not None and body.weight.grad is None
    print("evidence holds: the readout trained and the body got no gradient")
