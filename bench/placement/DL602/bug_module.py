# source: placement matrix
# category: DL602
# expect: flag 22
# evidence: the discriminator loss backpropagates into the generator and frees its graph, so the generator step raises "Trying to backward through the graph a second time".
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
        d_loss = bce(D(real), ones) + bce(D(fake), zeros)
        d_loss.backward()
        opt_d.step()
        opt_g.zero_grad()
        g_loss = bce(D(fake), ones)
        g_loss.backward()
        opt_g.step()
except RuntimeError as e:
    error = e

assert error is not None and "Trying to backward through the graph a second time" in str(error)
print("evidence holds: the generator step raised after the discriminator loss freed the generator's graph")
