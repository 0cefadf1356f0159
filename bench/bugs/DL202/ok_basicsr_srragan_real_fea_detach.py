# source: https://github.com/XPixelGroup/BasicSR/issues/50
# category: DL202
# expect: clean
# evidence: the feature loss detaches only the target real_fea computed by the fixed VGG netF; fake_fea keeps its graph, so l_g_fea sends gradients to netG, whose weights change, while netF is not in any optimizer.
import torch
import torch.nn as nn

torch.manual_seed(0)


class SRRaGANModel(object):
    def __init__(self):
        self.netG = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1))
        self.netF = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        for p in self.netF.parameters():
            p.requires_grad = False
        self.netF.eval()
        self.cri_pix = nn.L1Loss()
        self.l_pix_w = 1e-2
        self.cri_fea = nn.L1Loss()
        self.l_fea_w = 1.0
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=1e-3)

    def feed_data(self, data):
        self.var_L = data['LR']
        self.var_H = data['HR']

    def optimize_parameters(self, step):
        self.optimizer_G.zero_grad()
        self.fake_H = self.netG(self.var_L)
        l_g_total = 0
        l_g_pix = self.l_pix_w * self.cri_pix(self.fake_H, self.var_H)
        l_g_total += l_g_pix
        real_fea = self.netF(self.var_H).detach()
        fake_fea = self.netF(self.fake_H)
        l_g_fea = self.l_fea_w * self.cri_fea(fake_fea, real_fea)
        l_g_total += l_g_fea
        self.fea_grad = torch.autograd.grad(l_g_fea, self.netG[0].weight, retain_graph=True)[0]
        l_g_total.backward()
        self.optimizer_G.step()


if __name__ == "__main__":
    model = SRRaGANModel()
    w0 = model.netG[0].weight.detach().clone()
    for step in range(2):
        model.feed_data({'LR': torch.rand(2, 3, 8, 8), 'HR': torch.rand(2, 3, 8, 8)})
        model.optimize_parameters(step)
    assert model.fea_grad.abs().sum().item() > 0
    assert not torch.equal(model.netG[0].weight.detach(), w0)
    assert all(p.grad is None for p in model.netF.parameters())
    print("evidence holds: the feature loss with a detached target still trains netG; netF stays untouched")
