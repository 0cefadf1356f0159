# source: https://github.com/WatChMaL/CNN/blob/9a8285e651045d75b5494acf4b9835168f51e659/training_utils/engine_gan.py
# category: DL505
# expect: flag 49, 50, 55, 58, 67, 68, 75, 77, 79
# evidence: the discriminator/generator outputs are detached, and the engine flips requires_grad on the losses so backward runs; after training neither the generator nor the discriminator weight has moved
import numpy as np
import torch
from torch import Tensor
from torch.nn import BCEWithLogitsLoss
from torch.optim import Adam
import torch.nn as nn


class GAN(nn.Module):
    def __init__(self, nz=8, img=16):
        super().__init__()
        self.generator = nn.Sequential(nn.Linear(nz, 32), nn.ReLU(), nn.Linear(32, img), nn.Tanh())
        self.discriminator = nn.Sequential(nn.Linear(img, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))

    def forward(self, data, z):
        genimgs = self.generator(z)
        return {"genresults": self.discriminator(genimgs),
                "realresults": self.discriminator(data),
                "genimgs": genimgs}


class EngineGAN:
    def __init__(self, model, lr=0.01):
        self.model = model
        self.criterion = BCEWithLogitsLoss()
        self.optimizer_G = Adam(self.model.generator.parameters(), lr=lr, betas=(0.5, 0.999))
        self.optimizer_D = Adam(self.model.discriminator.parameters(), lr=lr, betas=(0.5, 0.999))
        self.data = None
        self.g_loss = None
        self.dreal_loss = None
        self.dfake_loss = None

    def forward(self, mode):
        if mode == "train":
            self.model.train()
        else:
            self.model.eval()
        valid = Tensor(self.data.shape[0], 1).fill_(1.0)
        fake = Tensor(self.data.shape[0], 1).fill_(0.0)

        # Discriminator gets updated multiple times for every time the generator does
        for i in np.arange(2):
            z = Tensor(np.random.normal(0, 1, (self.data.shape[0], 8)))
            model_results = self.model(self.data, z)
            gen_results = model_results['genresults'].detach()
            real_results = model_results['realresults'].detach()
            self.dreal_loss = self.criterion(real_results, valid)
            self.dfake_loss = self.criterion(gen_results, fake)

            if self.dreal_loss.requires_grad is False:
                self.dreal_loss.requires_grad = True

            if self.dfake_loss.requires_grad is False:
                self.dfake_loss.requires_grad = True

            self.optimizer_D.zero_grad()
            self.dreal_loss.backward()
            self.dfake_loss.backward()
            self.optimizer_D.step()

        z = Tensor(np.random.normal(0, 1, (self.data.shape[0], 8)))
        model_results = self.model(self.data, z)
        gen_results = model_results['genresults'].detach()
        real_results = model_results['realresults'].detach()
        self.g_loss = self.criterion(gen_results, valid)
        self.dreal_loss = self.criterion(real_results, valid)
        self.dfake_loss = self.criterion(gen_results, fake)
        d_loss = self.dreal_loss + self.dfake_loss

        if self.g_loss.requires_grad is False:
            self.g_loss.requires_grad = True
        if self.dreal_loss.requires_grad is False:
            self.dreal_loss.requires_grad = True
        if self.dfake_loss.requires_grad is False:
            self.dfake_loss.requires_grad = True
        return {"g_loss": self.g_loss.item(), "d_loss": d_loss.item()}

    def backward(self):
        self.optimizer_G.zero_grad()
        self.g_loss.backward()
        self.optimizer_G.step()

        self.optimizer_D.zero_grad()
        self.dreal_loss.backward()
        self.dfake_loss.backward()
        self.optimizer_D.step()

    def train(self, train_loader, epochs=1):
        for epoch in range(epochs):
            for data in train_loader:
                self.data = data.float()
                res = self.forward(mode="train")
                self.backward()
        return res


if __name__ == "__main__":
    torch.manual_seed(0)
    np.random.seed(0)
    model = GAN()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    engine = EngineGAN(model)
    train_loader = [torch.randn(4, 16) for _ in range(3)]
    engine.train(train_loader)
    assert engine.g_loss.grad_fn is None and engine.dreal_loss.grad_fn is None
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    print("evidence holds: every GAN loss is computed on detached outputs; forcing requires_grad trains nothing")
