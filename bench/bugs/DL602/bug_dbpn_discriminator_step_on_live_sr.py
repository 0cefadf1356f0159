# source: https://github.com/alterzero/DBPN-Pytorch/issues/37
# category: DL602
# expect: flag 73, 79
# evidence: D_loss.backward() already fills the generator's .grad before the discriminator step (2 backward passes through the generator per iteration, the first one wasted)
import torch
import torch.nn as nn
import torch.optim as optim


class Net(nn.Module):
    """Tiny stand-in for the DBPN super-resolution generator (x2)."""

    def __init__(self, num_channels=3, base_filter=8, scale_factor=2):
        super().__init__()
        self.feat = nn.Conv2d(num_channels, base_filter, 3, padding=1)
        self.up = nn.ConvTranspose2d(base_filter, base_filter, 4, stride=scale_factor, padding=1)
        self.output_conv = nn.Conv2d(base_filter, num_channels, 3, padding=1)

    def forward(self, x):
        return self.output_conv(torch.relu(self.up(torch.relu(self.feat(x)))))


class Discriminator(nn.Module):
    def __init__(self, num_channels=3, base_filter=8, image_size=16):
        super().__init__()
        self.input_conv = nn.Conv2d(num_channels, base_filter, 3, stride=2, padding=1)
        self.dense = nn.Linear(base_filter * (image_size // 2) ** 2, 1)

    def forward(self, x):
        out = nn.functional.leaky_relu(self.input_conv(x), 0.2)
        return torch.sigmoid(self.dense(out.flatten(1))).view(-1)


class Opt:
    w1 = 1e-2
    w3 = 1e-3
    lr = 1e-4


opt = Opt()
MSE_loss = nn.MSELoss()
BCE_loss = nn.BCELoss()


def norm(x):
    return (x - 0.5) / 0.5


def train(epoch, model, D, optimizer, D_optimizer, training_data_loader):
    G_epoch_loss = 0
    D_epoch_loss = 0
    model.train()
    D.train()
    for iteration, batch in enumerate(training_data_loader, 1):
        input, target = batch[0], batch[1]
        minibatch = input.size()[0]
        real_label = torch.ones(minibatch)
        fake_label = torch.zeros(minibatch)

        for j in range(minibatch):
            input[j] = norm(input[j])
            target[j] = norm(target[j])

        # Reset gradient
        D_optimizer.zero_grad()

        # Train discriminator with real data
        D_real_decision = D(target)
        D_real_loss = BCE_loss(D_real_decision, real_label)

        # Train discriminator with fake data
        recon_image = model(input)
        D_fake_decision = D(recon_image)
        D_fake_loss = BCE_loss(D_fake_decision, fake_label)

        D_loss = D_real_loss + D_fake_loss

        # Back propagation
        D_loss.backward()
        D_optimizer.step()

        # Reset gradient
        optimizer.zero_grad()

        # Train generator
        recon_image = model(input)
        D_fake_decision = D(recon_image)

        # Adversarial loss
        GAN_loss = opt.w3 * BCE_loss(D_fake_decision, real_label)

        # Content losses
        mse_loss = opt.w1 * MSE_loss(recon_image, target)

        # Back propagation
        G_loss = mse_loss + GAN_loss

        G_loss.backward()
        optimizer.step()

        G_epoch_loss += G_loss.item()
        D_epoch_loss += D_loss.item()
        print("Epoch: [%2d] [%4d/%4d] G_loss: %.8f, D_loss: %.8f" % (
            epoch, iteration, len(training_data_loader), G_loss.item(), D_loss.item()))
    return G_epoch_loss, D_epoch_loss


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Net()
    D = Discriminator(image_size=16)
    optimizer = optim.Adam(model.parameters(), lr=opt.lr, betas=(0.9, 0.999), eps=1e-8)
    D_optimizer = optim.Adam(D.parameters(), lr=opt.lr, betas=(0.9, 0.999), eps=1e-8)
    loader = [(torch.rand(2, 3, 8, 8), torch.rand(2, 3, 16, 16)) for _ in range(3)]

    g_weight = model.feat.weight
    arrivals = []
    g_weight.register_hook(lambda g: arrivals.append(1))
    g_grad_at_D_step = []
    D_optimizer.register_step_pre_hook(lambda o, a, kw: g_grad_at_D_step.append(g_weight.grad is not None and bool(g_weight.grad.abs().sum() > 0)))

    train(1, model, D, optimizer, D_optimizer, loader)

    assert g_grad_at_D_step == [True] * len(loader)  # the generator already holds D-loss gradients at D's step
    assert len(arrivals) == 2 * len(loader)  # two backward passes reach the generator per iteration
    print("evidence holds: the discriminator update back-propagates into the generator on every iteration")
