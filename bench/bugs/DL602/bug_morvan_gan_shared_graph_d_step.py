# source: https://github.com/MorvanZhou/PyTorch-Tutorial/issues/89
# category: DL602
# expect: flag 52, 58, 62
# evidence: D's loss is built on the live G_paintings and shares one graph with G_loss; after opt_D.step() the generator backward raises "modified by an inplace operation"
import numpy as np
import torch
import torch.nn as nn

torch.manual_seed(1)
np.random.seed(1)

# Hyper Parameters
BATCH_SIZE = 64
LR_G = 0.0001
LR_D = 0.0001
N_IDEAS = 5             # size of the generator's random input
ART_COMPONENTS = 15     # points per curve
PAINT_POINTS = np.vstack([np.linspace(-1, 1, ART_COMPONENTS) for _ in range(BATCH_SIZE)])


def artist_works():
    """Real samples: a batch of random parabolas."""
    a = np.random.uniform(1, 2, size=BATCH_SIZE)[:, np.newaxis]
    paintings = a * np.power(PAINT_POINTS, 2) + (a - 1)
    paintings = torch.from_numpy(paintings).float()
    return paintings


G = nn.Sequential(
    nn.Linear(N_IDEAS, 128),
    nn.ReLU(),
    nn.Linear(128, ART_COMPONENTS),
)

D = nn.Sequential(
    nn.Linear(ART_COMPONENTS, 128),
    nn.ReLU(),
    nn.Linear(128, 1),
    nn.Sigmoid(),                       # probability that a curve is real
)

opt_D = torch.optim.Adam(D.parameters(), lr=LR_D)
opt_G = torch.optim.Adam(G.parameters(), lr=LR_G)


def train(steps):
    for step in range(steps):
        artist_paintings = artist_works()
        G_ideas = torch.randn(BATCH_SIZE, N_IDEAS, requires_grad=True)
        G_paintings = G(G_ideas)
        prob_artist0 = D(artist_paintings)
        prob_artist1 = D(G_paintings)

        D_loss = - torch.mean(torch.log(prob_artist0) + torch.log(1. - prob_artist1))
        G_loss = torch.mean(torch.log(1. - prob_artist1))

        opt_D.zero_grad()
        D_loss.backward(retain_graph=True)          # keeps the shared graph for G_loss
        opt_D.step()

        opt_G.zero_grad()
        G_loss.backward()
        opt_G.step()


if __name__ == "__main__":
    g_before = [p.detach().clone() for p in G.parameters()]
    try:
        train(steps=3)
    except RuntimeError as e:
        assert "modified by an inplace operation" in str(e)
    else:
        raise AssertionError("expected G_loss.backward() to fail")
    assert all(torch.equal(a, b) for a, b in zip(g_before, G.parameters()))  # G never stepped
    print("evidence holds: the D step on the un-detached fake shares its graph with G_loss; opt_D.step() invalidates it")
