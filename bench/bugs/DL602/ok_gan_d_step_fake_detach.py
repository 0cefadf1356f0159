# source: https://blog.csdn.net/allrubots/article/details/121860271
# category: DL602
# expect: clean
# evidence: the discriminator step uses D(fake.detach()), so d_loss.backward() adds nothing to any generator gradient, while the later generator step (D(fake) without detach) does train G.
import torch
import torch.nn as nn

torch.manual_seed(0)

z_dim = 16
display_step = 2
G = nn.Sequential(nn.Linear(z_dim, 32), nn.ReLU(), nn.Linear(32, 784), nn.Sigmoid())
D = nn.Sequential(nn.Linear(784, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1), nn.Sigmoid())
G_optimizer = torch.optim.Adam(G.parameters(), lr=2e-4)
D_optimizer = torch.optim.Adam(D.parameters(), lr=2e-4)
BCE_loss = nn.BCELoss()
# stand-in for the MNIST dataloader (flattened 28x28 images)
dataloader = [(torch.rand(8, 784), torch.zeros(8)) for _ in range(2)]


def train(check=None):
    mean_D_loss = 0.0
    mean_G_loss = 0.0
    for x, _ in dataloader:
        z = torch.randn(x.size(0), z_dim)
        # ---- discriminator ----
        D_optimizer.zero_grad()
        fake = G(z)

        d_fake_res = D(fake.detach())
        d_fake_loss = BCE_loss(d_fake_res, torch.zeros_like(d_fake_res))
        d_real_res = D(x)  # shape : torch.Size([128,1])
        d_real_loss = BCE_loss(d_real_res, torch.ones_like(d_real_res))
        d_loss = (d_fake_loss + d_real_loss) / 2

        mean_D_loss += d_loss.item() / display_step
        if check is not None:
            check(G, "before")
        d_loss.backward()
        if check is not None:
            check(G, "after")
        D_optimizer.step()

        # ---- generator ----
        G_optimizer.zero_grad()
        fake = G(z)
        d_fake_res = D(fake)
        g_loss = BCE_loss(d_fake_res, torch.ones_like(d_fake_res))
        mean_G_loss += g_loss.item() / display_step
        g_loss.backward()
        G_optimizer.step()
    return mean_D_loss, mean_G_loss


if __name__ == "__main__":
    G_before = [p.detach().clone() for p in G.parameters()]

    snap = {}

    def no_grad_in_G(gen, when):
        grads = [None if p.grad is None else p.grad.clone() for p in gen.parameters()]
        if when == "before":
            snap["g"] = grads
            return
        # d_loss.backward() did not touch any generator gradient: the detach kept D's loss out of G
        for a, b in zip(snap["g"], grads):
            assert (a is None and b is None) or torch.equal(a, b)

    train(check=no_grad_in_G)
    with torch.no_grad():
        assert any(not torch.equal(b, p) for b, p in zip(G_before, G.parameters()))
    print("evidence holds: D step leaves G without gradient, G step still trains the generator")
