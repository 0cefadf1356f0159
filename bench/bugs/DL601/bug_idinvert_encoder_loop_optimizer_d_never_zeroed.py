# source: https://github.com/Hsintien-Ng/idinvert_pytorch-reproduced/issues/1
# category: DL601
# expect: flag 53, 54
# evidence: the discriminator step calls D_loss.backward() and optimizer_D.step() without ever zeroing D's gradients, so from the second iteration on D is updated with stale gradients from earlier D steps and from the encoder's adversarial loss.
import torch
import torch.nn as nn
import torch.nn.functional as F
from types import SimpleNamespace


class Net(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net


def GAN_loss(scores_out, real=True):
    if real:
        return torch.mean(F.softplus(-scores_out))
    else:
        return torch.mean(F.softplus(scores_out))


def training_loop(config, E_lr_args, D_lr_args, E_loss_args, D_loss_args, train_dataloader, max_epoch=1):
    G = Net(nn.Sequential(nn.Linear(8, 16), nn.Tanh()))            # frozen synthesis network
    E = Net(nn.Sequential(nn.Linear(16, 8)))
    D = Net(nn.Sequential(nn.Linear(16, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1)))
    G.net.eval()
    E.net.train()
    D.net.train()

    optimizer_E = torch.optim.Adam(E.net.parameters(), lr=E_lr_args.learning_rate)
    optimizer_D = torch.optim.Adam(D.net.parameters(), lr=D_lr_args.learning_rate)

    d_grad_before_backward = []
    for epoch in range(max_epoch):
        for step, items in enumerate(train_dataloader):
            x = items.float()
            z = E.net(x)
            x_rec = G.net(z)

            # ===============================
            #         optimizing D
            # ===============================
            x_real = D.net(x)
            x_fake = D.net(x_rec.detach())
            loss_real = GAN_loss(x_real, real=True)
            loss_fake = GAN_loss(x_fake, real=False)
            D_loss = D_loss_args.loss_real_weight * loss_real + D_loss_args.loss_fake_weight * loss_fake
            with torch.no_grad():
                d_grad_before_backward.append(
                    sum(p.grad.abs().sum().item() for p in D.net.parameters() if p.grad is not None))
            D_loss.backward()
            optimizer_D.step()

            # ===============================
            #         optimizing G
            # ===============================
            loss_pix = torch.mean((x - x_rec) ** 2)
            x_adv = D.net(x_rec)
            loss_adv = GAN_loss(x_adv, real=True)
            E_loss = E_loss_args.loss_pix_weight * loss_pix + E_loss_args.loss_adv_weight * loss_adv
            optimizer_E.zero_grad()
            E_loss.backward()
            optimizer_E.step()
    return E, D, d_grad_before_backward


if __name__ == "__main__":
    torch.manual_seed(0)
    config = SimpleNamespace(train_batch_size=4)
    E_lr_args = SimpleNamespace(learning_rate=1e-3)
    D_lr_args = SimpleNamespace(learning_rate=1e-3)
    E_loss_args = SimpleNamespace(loss_pix_weight=1.0, loss_adv_weight=0.1)
    D_loss_args = SimpleNamespace(loss_real_weight=1.0, loss_fake_weight=1.0)
    train_dataloader = [torch.randn(4, 16) for _ in range(4)]

    E, D, stale = training_loop(config, E_lr_args, D_lr_args, E_loss_args, D_loss_args, train_dataloader)

    assert stale[0] == 0.0
    assert all(s > 0 for s in stale[1:]), stale
    print("evidence holds: before each D_loss.backward() after the first, D already held gradient mass "
          "%s (never zeroed), so optimizer_D.step() used accumulated gradients"
          % ["%.3f" % s for s in stale[1:]])
