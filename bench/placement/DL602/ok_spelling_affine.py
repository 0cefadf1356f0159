# source: placement matrix
# category: DL602
# expect: clean
# evidence: the rescaled generator output is detached in the discriminator loss; both steps run.
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
    errD = adv(netD(real), torch.ones(6, 1)) + adv(netD(fake.detach()), torch.zeros(6, 1))
    errD.backward()
    optD.step()
    optG.zero_grad()
    errG = adv(netD(fake), torch.ones(6, 1))
    errG.backward()
    optG.step()
except RuntimeError as e:
    failure = str(e)

assert failure is None
assert netG[0].weight.grad is not None
print("evidence holds: both steps ran and the generator learned from errG only")
