# source: https://pytroubles.com/ru/posts/id2658-gan-v-pytorch-ispravljaem-oshibku-backward-cherez-detach
# category: DL602
# expect: flag 43, 46
# evidence: after the g_update_factor generator steps, the discriminator step feeds the non-detached fake_batch whose generator graph was already freed by g_loss.backward(), so d_loss.backward() raises "Trying to backward through the graph a second time".
import torch
import torch.nn as nn

torch.manual_seed(0)

dev = "cpu"
latent_dim = 8
total_epochs = 1
g_update_factor = 2   # n generator updates ...
d_update_factor = 1   # ... per m discriminator steps, n > m

netG = nn.Sequential(nn.Linear(latent_dim, 32), nn.ReLU(), nn.Linear(32, 784), nn.Tanh()).to(dev)
netD = nn.Sequential(nn.Linear(784, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1), nn.Sigmoid()).to(dev)
bce_loss = nn.BCELoss()
optG = torch.optim.Adam(netG.parameters(), lr=2e-4)
optD = torch.optim.Adam(netD.parameters(), lr=2e-4)
# stand-in for an MNIST loader: (images, labels) with 28x28 images
data_stream = [(torch.rand(4, 1, 28, 28), torch.zeros(4)) for _ in range(2)]


def train():
    for epoch in range(total_epochs):
        for batch_id, (real_batch, _) in enumerate(data_stream):
            real_batch = real_batch.view(-1, 784).to(dev)
            bsz = real_batch.shape[0]
            # Generator updates (n times)
            for _ in range(g_update_factor):
                z = torch.randn(bsz, latent_dim).to(dev)
                fake_batch = netG(z)
                gen_scores = netD(fake_batch).view(-1)
                g_loss = bce_loss(gen_scores, torch.ones_like(gen_scores))
                g_loss.backward()
                optG.step()
                netG.zero_grad()
            # Discriminator updates (m times)
            for _ in range(d_update_factor):
                netD.zero_grad()
                real_scores = netD(real_batch).view(-1)
                fake_scores = netD(fake_batch).view(-1)
                d_loss = bce_loss(real_scores, torch.ones_like(real_scores)) + \
                    bce_loss(fake_scores, torch.zeros_like(fake_scores))
                d_loss.backward()
                optD.step()


if __name__ == "__main__":
    try:
        train()
    except RuntimeError as e:
        assert "Trying to backward through the graph a second time" in str(e), str(e)
        print("evidence holds: D step on the non-detached fake_batch raised 'backward through the graph a second time'")
    else:
        raise AssertionError("discriminator backward did not raise")
