# source: placement matrix
# category: DL602
# expect: flag 15
# evidence: gan_round feeds the generator output to the critic loss without detach; the generator update then raises "Trying to backward through the graph a second time".
import torch
from torch import nn

torch.manual_seed(0)


def gan_round(gen, disc, opt_gen, opt_disc, real, noise):
    crit = nn.BCEWithLogitsLoss()
    sample = gen(noise)
    opt_disc.zero_grad()
    dl = crit(disc(real), torch.ones(len(real), 1)) + crit(disc(sample), torch.zeros(len(sample), 1))
    dl.backward()
    opt_disc.step()
    opt_gen.zero_grad()
    gl = crit(disc(sample), torch.ones(len(sample), 1))
    gl.backward()
    opt_gen.step()


if __name__ == "__main__":
    gen = nn.Sequential(nn.Linear(3, 6), nn.Tanh(), nn.Linear(6, 4))
    disc = nn.Sequential(nn.Linear(4, 6), nn.LeakyReLU(0.2), nn.Linear(6, 1))
    opt_gen = torch.optim.SGD(gen.parameters(), lr=0.01)
    opt_disc = torch.optim.SGD(disc.parameters(), lr=0.01)
    try:
        gan_round(gen, disc, opt_gen, opt_disc, torch.randn(5, 4), torch.randn(5, 3))
        msg = ""
    except RuntimeError as e:
        msg = str(e)
    assert "Trying to backward through the graph a second time" in msg
    print("evidence holds: the generator backward raised after the critic loss consumed its graph")
