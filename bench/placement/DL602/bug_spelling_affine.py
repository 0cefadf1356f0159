# source: placement matrix
# category: DL602
# expect: flag 20
# evidence: the rescaled generator output reaches the discriminator loss undetached; the generator step raises "Trying to backward through the graph a second time".
import torch
from torch import nn

torch.manual_seed(0)
netG = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3), nn.Tanh())
netD = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1))
optG = torch.optim.Adam(netG.parameters(), lr=1e-3)
optD = torch.optim.Adam(netD.parameters(), lr=1e-3)
adv = nn.BCEWithLogitsLoss()
real = torch.rand(6, 3)
z = torch.randn(6, 4)
failure = None
try:
    fake = netG(z) * 0.5 + 0.5
    optD.zero_grad()
    errD = adv(netD(real), torch.ones(6, 1)) + adv(netD(fake), torch.zeros(6, 1))
    errD.backward()
    optD.step()
    optG.zero_grad()
    errG = adv(netD(fake), torch.ones(6, 1))
    errG.backward()
    optG.step()
except RuntimeError as e:
    failure = str(e)

assert failure is not None and "Trying to backward through the graph a second time" in failure
print("evidence holds: the generator step raised after errD freed the generator's graph")
