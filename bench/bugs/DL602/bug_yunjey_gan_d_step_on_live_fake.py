# source: https://github.com/yunjey/pytorch-tutorial/issues/56
# category: DL602
# expect: flag 62, 68
# evidence: d_loss.backward() back-propagates through G on every discriminator update: G's .grad is filled before d_optimizer.step() and G is traversed twice per iteration
import torch
import torch.nn as nn

torch.manual_seed(0)

# Hyper-parameters
latent_size = 16
hidden_size = 32
image_size = 49
batch_size = 8

# Discriminator
D = nn.Sequential(
    nn.Linear(image_size, hidden_size),
    nn.LeakyReLU(0.2),
    nn.Linear(hidden_size, hidden_size),
    nn.LeakyReLU(0.2),
    nn.Linear(hidden_size, 1),
    nn.Sigmoid())

# Generator
G = nn.Sequential(
    nn.Linear(latent_size, hidden_size),
    nn.ReLU(),
    nn.Linear(hidden_size, hidden_size),
    nn.ReLU(),
    nn.Linear(hidden_size, image_size),
    nn.Tanh())

criterion = nn.BCELoss()
d_optimizer = torch.optim.Adam(D.parameters(), lr=0.0002)
g_optimizer = torch.optim.Adam(G.parameters(), lr=0.0002)


def reset_grad():
    d_optimizer.zero_grad()
    g_optimizer.zero_grad()


def train(data_loader, num_epochs):
    total_step = len(data_loader)
    for epoch in range(num_epochs):
        for i, (images, _) in enumerate(data_loader):
            images = images.reshape(batch_size, -1)

            real_labels = torch.ones(batch_size, 1)
            fake_labels = torch.zeros(batch_size, 1)

            # ----- discriminator -----
            # BCE on real images: only the log(D(x)) term is active
            outputs = D(images)
            d_loss_real = criterion(outputs, real_labels)
            real_score = outputs

            # BCE on generated images: only the log(1 - D(G(z))) term is active
            z = torch.randn(batch_size, latent_size)
            fake_images = G(z)
            outputs = D(fake_images)
            d_loss_fake = criterion(outputs, fake_labels)
            fake_score = outputs

            d_loss = d_loss_real + d_loss_fake
            reset_grad()
            d_loss.backward()
            d_optimizer.step()

            # ----- generator -----
            z = torch.randn(batch_size, latent_size)
            fake_images = G(z)
            outputs = D(fake_images)

            # non-saturating loss: maximise log(D(G(z)))
            g_loss = criterion(outputs, real_labels)

            reset_grad()
            g_loss.backward()
            g_optimizer.step()

            print('Epoch [{}/{}], Step [{}/{}], d_loss: {:.4f}, g_loss: {:.4f}, D(x): {:.2f}, D(G(z)): {:.2f}'
                  .format(epoch, num_epochs, i + 1, total_step, d_loss.item(), g_loss.item(),
                          real_score.mean().item(), fake_score.mean().item()))


if __name__ == "__main__":
    torch.manual_seed(0)
    data_loader = [(torch.rand(batch_size, 1, 7, 7) * 2 - 1, torch.zeros(batch_size)) for _ in range(3)]

    g_w = G[0].weight
    arrivals = []
    g_w.register_hook(lambda g: arrivals.append(1))
    g_has_grad_at_d_step = []
    d_optimizer.register_step_pre_hook(
        lambda o, a, kw: g_has_grad_at_d_step.append(g_w.grad is not None and bool(g_w.grad.abs().sum() > 0)))

    train(data_loader, num_epochs=1)

    assert g_has_grad_at_d_step == [True] * len(data_loader)
    assert len(arrivals) == 2 * len(data_loader)
    print("evidence holds: every discriminator update also computes (and throws away) gradients for G")
