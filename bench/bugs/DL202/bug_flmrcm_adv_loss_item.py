# source: https://github.com/guopengf/FL-MRCM/issues/10
# category: DL202
# expect: flag 78
# evidence: the adversarial term is added to the reconstruction loss as a Python float, so the gradient reaching the reconstruction network is exactly the gradient of the L1 term alone, whatever the adversarial loss is.
import numpy as np
import torch
from torch import nn
from torch.autograd import Variable

torch.manual_seed(0)


class ReconNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(16, 8)
        self.dec = nn.Linear(8, 16)

    def forward(self, x):
        z = torch.relu(self.enc(x))
        return self.dec(z), z


class LocalUpdate_ad_da(object):
    def __init__(self, args, device, dataset, dataset_target, optimizer, optimizer_fd, flag):
        self.args = args
        self.device = device
        self.loss_func = nn.L1Loss().to(device)
        self.adv_loss = nn.BCEWithLogitsLoss().to(device)
        self.ldr_train = dataset
        self.target_domain = dataset_target
        self.optimizer = optimizer
        self.optimizer_fd = optimizer_fd
        self.flag = flag

    def set_requires_grad(self, nets, requires_grad=False):
        if not isinstance(nets, list):
            nets = [nets]
        for net in nets:
            if net is not None:
                for param in net.parameters():
                    param.requires_grad = requires_grad

    def train(self, net, net_fd, epoch, idx):
        net.train()
        net_fd.train()
        optimizer = self.optimizer
        optimizer_fd = self.optimizer_fd
        batch_loss_adv_g = []
        for batch_idx, (batch, batch_t) in enumerate(zip(self.ldr_train, self.target_domain)):
            input, target = batch
            input_t, target_t = batch_t
            net.zero_grad()
            net_fd.zero_grad()
            output, z = net(input.to(self.device))
            output_t, z_t = net(input_t.to(self.device))
            src_domain_code = np.repeat(np.array([[*([1]), *([0])]]), input.shape[0], axis=0)
            tgt_domain_code = np.repeat(np.array([[*([0]), *([1])]]), input_t.shape[0], axis=0)
            src_domain_code = Variable(torch.FloatTensor(src_domain_code).to(self.device), requires_grad=False)
            tgt_domain_code = Variable(torch.FloatTensor(tgt_domain_code).to(self.device), requires_grad=False)

            if not self.flag:
                self.set_requires_grad(net_fd, True)
                src_domain_pred = net_fd(z.detach())
                tgt_domain_pred = net_fd(z_t.detach())
                df_loss = (self.adv_loss(src_domain_pred, 1 - src_domain_code) + self.adv_loss(tgt_domain_pred, 1 - tgt_domain_code)) / 2
                df_loss.backward()
                optimizer_fd.step()

            self.set_requires_grad(net_fd, False)
            loss_adv_g = 0
            if not self.flag:
                src_domain_pred = net_fd(z)
                tgt_domain_pred = net_fd(z_t)
                df_loss_src = self.adv_loss(src_domain_pred, src_domain_code)
                df_loss_tgt = self.adv_loss(tgt_domain_pred, tgt_domain_code)
                loss_adv_g = ((df_loss_src + df_loss_tgt) / 2)
                loss_adv_g = loss_adv_g.detach().item()
            batch_loss_adv_g.append(loss_adv_g)

            L1_loss = self.loss_func(output, target.to(self.device))
            if not self.flag:
                loss = L1_loss + loss_adv_g
            else:
                loss = L1_loss
            loss.backward()
            self.last_grad = net.enc.weight.grad.detach().clone()
            self.last_l1_grad = torch.autograd.grad(self.loss_func(net(input)[0], target), net.enc.weight)[0]
            optimizer.step()
        return net.state_dict(), batch_loss_adv_g


if __name__ == "__main__":
    net = ReconNet()
    net_fd = nn.Linear(8, 2)
    optimizer = torch.optim.RMSprop(net.parameters(), lr=1e-3)
    optimizer_fd = torch.optim.Adam(net_fd.parameters(), lr=1e-3)
    src = [(torch.randn(4, 16), torch.randn(4, 16)) for _ in range(2)]
    tgt = [(torch.randn(4, 16), torch.randn(4, 16)) for _ in range(2)]
    local = LocalUpdate_ad_da(None, "cpu", src, tgt, optimizer, optimizer_fd, flag=False)
    _, adv_values = local.train(net, net_fd, epoch=0, idx=0)
    assert all(isinstance(v, float) and v > 0 for v in adv_values)
    assert torch.allclose(local.last_grad, local.last_l1_grad)
    print("evidence holds: adversarial loss (%.3f) reaches the recon net as a float; its gradient equals the L1-only gradient" % adv_values[-1])
