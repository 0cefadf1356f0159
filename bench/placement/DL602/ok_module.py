# source: placement matrix
# category: DL602
# expect: clean
# evidence: the discriminator sees fake.detach(), so its loss leaves the generator alone and both steps run.
import torch
import torch.nn as nn

torch.manual_seed(0)
G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
D = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
opt_g = torch.optim.Adam(G.parameters(), lr=1e-3)
opt_d = torch.optim.Adam(D.parameters(), lr=1e-3)
bce = nn.BCEWithLogitsLoss()
ones, zeros = torch.ones(8, 1), torch.zeros(8, 1)
error = None
try:
    for it in range(2):
        real = torch.randn(8, 2) + 2.0
        z = torch.randn(8, 2)
        fake = G(z)
        opt_d.zero_grad()
        d_loss = bce(D(real), ones) + bce(D(fake.detach()), zeros)
        d_loss.backward()
        opt_d.step()
        opt_g.zero_grad()
        g_loss = bce(D(fake), ones)
        g_loss.backward()
        opt_g.step()
except RuntimeError as e:
    error = e

assert error is None
assert G[0].weight.grad is not None and D[0].weight.grad is not None
print("evidence holds: both the discriminator and the generator steps ran")
