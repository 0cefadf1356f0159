# source: https://github.com/pytorch/examples/blob/main/vae/main.py
# category: DL103
# expect: clean
# evidence: torch.utils.data is a module path and `data` a batch variable, not Tensor.data: train() updates the VAE and test() under no_grad returns reconstructions with no graph
import argparse

import torch
import torch.utils.data
from torch import nn, optim
from torch.nn import functional as F

parser = argparse.ArgumentParser(description='VAE MNIST Example')
parser.add_argument('--batch-size', type=int, default=4)
parser.add_argument('--log-interval', type=int, default=10)
args = parser.parse_args([])
device = torch.device("cpu")

train_loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(torch.rand(16, 1, 28, 28), torch.zeros(16)),
    batch_size=args.batch_size, shuffle=True)
test_loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(torch.rand(8, 1, 28, 28), torch.zeros(8)),
    batch_size=args.batch_size, shuffle=False)


class VAE(nn.Module):
    def __init__(self):
        super(VAE, self).__init__()
        self.fc1 = nn.Linear(784, 40)
        self.fc21 = nn.Linear(40, 4)
        self.fc22 = nn.Linear(40, 4)
        self.fc3 = nn.Linear(4, 40)
        self.fc4 = nn.Linear(40, 784)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar):
        std = torch.exp(0.5 * logvar)
        eps = torch.randn_like(std)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x):
        mu, logvar = self.encode(x.view(-1, 784))
        z = self.reparameterize(mu, logvar)
        return self.decode(z), mu, logvar


model = VAE().to(device)
optimizer = optim.Adam(model.parameters(), lr=1e-3)


# Reconstruction + KL divergence losses summed over all elements and batch
def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 784), reduction='sum')
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


def train(epoch):
    model.train()
    train_loss = 0
    for batch_idx, (data, _) in enumerate(train_loader):
        data = data.to(device)
        optimizer.zero_grad()
        recon_batch, mu, logvar = model(data)
        loss = loss_function(recon_batch, data, mu, logvar)
        loss.backward()
        train_loss += loss.item()
        optimizer.step()
    return train_loss / len(train_loader.dataset)


def test(epoch):
    model.eval()
    test_loss = 0
    recons = []
    with torch.no_grad():
        for i, (data, _) in enumerate(test_loader):
            data = data.to(device)
            recon_batch, mu, logvar = model(data)
            test_loss += loss_function(recon_batch, data, mu, logvar).item()
            recons.append(recon_batch)
    test_loss /= len(test_loader.dataset)
    return recons


if __name__ == "__main__":
    torch.manual_seed(0)
    before = [p.detach().clone() for p in model.parameters()]
    train(1)
    recons = test(1)
    assert all(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
    assert all(r.grad_fn is None and not r.requires_grad for r in recons)
    print("evidence holds: the torch.utils.data loaders feed a VAE that trains; test reconstructions carry no graph")
