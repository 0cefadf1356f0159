# source: placement matrix
# category: DL503
# expect: clean
# evidence: the caller calls retain_grad() on the helper's activation, so its .grad is populated after backward.
import torch
from torch import nn

torch.manual_seed(0)


def encode(enc, xs):
    return torch.relu(enc(xs))


def latent_gradient(enc, dec, xs):
    z = encode(enc, xs)
    z.retain_grad()
    obj = dec(z).pow(2).mean()
    obj.backward()
    gz = z.grad
    return gz


if __name__ == "__main__":
    enc, dec = nn.Linear(3, 5), nn.Linear(5, 3)
    xs = torch.randn(6, 3)
    gz = latent_gradient(enc, dec, xs)
    assert gz is not None and gz.shape == (6, 5)
    assert enc.weight.grad is not None
    print("evidence holds: the latent's gradient is available to the caller")
