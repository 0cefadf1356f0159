# source: placement matrix
# category: DL701
# expect: clean
# evidence: Trainer.step keeps self.encoder's output in the graph; both encoder and decoder train.
import torch

torch.manual_seed(0)


class Trainer:
    def __init__(self):
        self.encoder = torch.nn.Sequential(torch.nn.Linear(5, 6), torch.nn.ReLU())
        self.decoder = torch.nn.Linear(6, 5)
        params = list(self.encoder.parameters()) + list(self.decoder.parameters())
        self.updater = torch.optim.SGD(params, lr=0.05)

    def step(self, batch):
        latent = self.encoder(batch)
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
    assert tr.encoder[0].weight.grad is not None and tr.decoder.weight.grad is not None
    assert not torch.equal(tr.encoder[0].weight.detach(), before)
    print("evidence holds: encoder and decoder both trained")
