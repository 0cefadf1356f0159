# source: placement matrix
# category: DL503
# expect: flag 19
# evidence: the helper returns a non-leaf activation; the caller reads its .grad after backward and gets None.
import torch
from torch import nn

torch.manual_seed(0)


def encode(enc, xs):
    return torch.relu(enc(xs))


def latent_gradient(enc, dec, xs):
    z = encode(enc, xs)
    obj = dec(z).pow(2).mean()
    obj.backward()
    gz = z.grad
    return gz


if __name__ == "__main__":
    enc, dec = nn.Linear(3, 5), nn.Linear(5, 3)
    xs = torch.randn(6, 3)
    gz = latent_gradient(enc, dec, xs)
    assert gz is None
    assert enc.weight.grad is not None
    print("evidence holds: the latent's .grad is None although the encoder got gradients")
