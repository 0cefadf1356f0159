# source: placement matrix
# category: DL602
# expect: clean
# evidence: with fake.detach() the discriminator update leaves every generator gradient None.
import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)


def d_update(gen, disc, d_opt, real, z):
    fake = gen(z)
    d_opt.zero_grad()
    bce = F.binary_cross_entropy_with_logits
    loss_d = bce(disc(real), torch.ones(len(real), 1)) + bce(disc(fake.detach()), torch.zeros(len(fake), 1))
    loss_d.backward()
    d_opt.step()
    return fake


if __name__ == "__main__":
    gen = nn.Sequential(nn.Linear(3, 6), nn.ReLU(), nn.Linear(6, 2))
    disc = nn.Sequential(nn.Linear(2, 6), nn.ReLU(), nn.Linear(6, 1))
    d_opt = torch.optim.SGD(disc.parameters(), lr=0.01)
    d_update(gen, disc, d_opt, torch.randn(4, 2), torch.randn(4, 3))
    assert all(p.grad is None for p in gen.parameters())
    assert disc[0].weight.grad is not None
    print("evidence holds: the discriminator trained and the generator got no gradient")
