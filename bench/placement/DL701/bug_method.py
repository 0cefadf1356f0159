# source: placement matrix
# category: DL701
# expect: flag 20
# evidence: Trainer.step wraps self.encoder's output in Variable, detaching it; self.encoder never receives a gradient.
import torch
from torch.autograd import Variable

torch.manual_seed(0)


class Trainer:
    def __init__(self):
        self.encoder = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.ReLU())
        self.decoder = torch.nn.Linear(6, 5)
        params = list(self.encoder.parameters()) + list(self.decoder.parameters())
        self.updater = torch.optim.SGD(params, lr=0.05)

    def step(self, batch):
        latent = self.encoder(batch)
        latent = Variable(latent)
        recon = self.decoder(latent)
        objective = torch.nn.functional.mse_loss(recon, batch)
        self.updater.zero_grad()
        objective.backward()
        self.updater.step()


if __name__ == "__main__":
    tr = Trainer()
    before = tr.encoder[0].weight.detach().clone()
    for _ in range(3):
        tr.step(torch.randn(4, 5))
    assert tr.encoder[0].weight.grad is None and tr.decoder.weight.grad is not None
    assert torch.equal(tr.encoder[0].weight.detach(), before)
    print("evidence holds: only the decoder trained; the encoder was cut off by Variable")
