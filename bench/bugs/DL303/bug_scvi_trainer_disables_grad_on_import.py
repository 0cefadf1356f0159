# source: https://github.com/scverse/scvi-tools/issues/214
# category: DL303
# expect: flag 15, 77, 80
# evidence: the trainer module turns grad off at import; its own train() re-enables it and works, but any other training code that runs afterwards builds no graph and its loss.backward() raises "element 0 of tensors does not require grad"
import copy

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import functional

# ---- what the trainer module did when it was imported ----------------------------------
# (scvi/inference/trainer.py): a module-level switch meant for its posterior computations

torch.set_grad_enabled(False)


class VAE(nn.Module):
    def __init__(self, n_input, n_latent=2):
        super().__init__()
        self.encoder = nn.Linear(n_input, 2 * n_latent)
        self.decoder = nn.Linear(n_latent, n_input)

    def forward(self, x):
        qz_m, qz_logv = self.encoder(x).chunk(2, dim=-1)
        z = qz_m + torch.randn_like(qz_m) * (0.5 * qz_logv).exp()
        reconst = self.decoder(z)
        kl = -0.5 * (1 + qz_logv - qz_m ** 2 - qz_logv.exp()).sum(-1)
        return functional.mse_loss(reconst, x, reduction="none").sum(-1), kl


class Trainer:
    def __init__(self, model, gene_dataset, lr=1e-2):
        self.model = model
        self.gene_dataset = gene_dataset
        self.lr = lr
        self.history = []

    def loss(self, tensors):
        reconst_loss, kl_divergence = self.model(tensors)
        return torch.mean(reconst_loss + kl_divergence)

    def train(self, n_epochs=5):
        with torch.set_grad_enabled(True):
            self.model.train()
            params = filter(lambda p: p.requires_grad, self.model.parameters())
            optimizer = torch.optim.Adam(params, lr=self.lr)
            for epoch in range(n_epochs):
                for tensors in self.gene_dataset:
                    loss = self.loss(tensors)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                    self.history.append(loss.item())
        self.model.eval()

    def get_latent(self):
        return [self.model.encoder(t).chunk(2, dim=-1)[0] for t in self.gene_dataset]


# ---- the user's own code, in the same process after the import --------------------------

class Regressor(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 1)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def fit_regression(model, x, y, steps=5):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    for _ in range(steps):
        pred = model(x)
        loss = F.mse_loss(pred, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


if __name__ == "__main__":
    torch.manual_seed(0)
    cells = [torch.randn(8, 5) for _ in range(3)]
    vae = VAE(5)
    enc0 = copy.deepcopy(vae.encoder.weight)
    trainer = Trainer(vae, cells)
    trainer.train(n_epochs=2)
    assert not torch.equal(enc0, vae.encoder.weight)  # the library's own loop re-enables grad

    assert not torch.is_grad_enabled()  # ...and leaves it off for everyone else
    reg = Regressor()
    w0 = reg.fc1.weight.clone()
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    try:
        fit_regression(reg, x, y)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised is not None and "element 0 of tensors does not require grad" in raised, raised
    assert torch.equal(w0, reg.fc1.weight)
    print("evidence holds: after the import-time set_grad_enabled(False), the user's training step raises and trains nothing")
