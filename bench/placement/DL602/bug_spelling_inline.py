# source: placement matrix
# category: DL602
# expect: flag 21
# evidence: the discriminator step calls the generator inline in its loss; after it, the generator's parameters hold gradients from the discriminator loss.
import torch

torch.manual_seed(0)


class Adversarial:
    def __init__(self):
        self.gen = torch.nn.Sequential(torch.nn.Linear(2, 6), torch.nn.ReLU(), torch.nn.Linear(6, 2))
        self.disc = torch.nn.Sequential(torch.nn.Linear(2, 6), torch.nn.ReLU(), torch.nn.Linear(6, 1))
        self.opt_disc = torch.optim.SGD(self.disc.parameters(), lr=0.01)
        self.opt_gen = torch.optim.SGD(self.gen.parameters(), lr=0.01)
        self.lossf = torch.nn.BCEWithLogitsLoss()

    def train_discriminator(self, real):
        z = torch.randn(real.shape[0], 2)
        self.opt_disc.zero_grad()
        l_d = self.lossf(self.disc(real), torch.ones(len(real), 1)) + self.lossf(self.disc(self.gen(z)), torch.zeros(len(real), 1))
        l_d.backward()
        self.opt_disc.step()

    def train_generator(self, n):
        self.opt_gen.zero_grad()
        l_g = self.lossf(self.disc(self.gen(torch.randn(n, 2))), torch.ones(n, 1))
        l_g.backward()
        self.opt_gen.step()


if __name__ == "__main__":
    gan = Adversarial()
    gan.train_discriminator(torch.randn(5, 2))
    assert all(p.grad is not None for p in gan.gen.parameters())
    gan.train_generator(5)
    print("evidence holds: the discriminator loss pushed gradients into the generator")
