# source: placement matrix
# category: DL201
# expect: flag 16
# evidence: Trainer.update rebuilds the features with torch.tensor(...tolist()), which cuts the graph, so the encoder parameters that self.opt owns get grad None and stay unchanged.
import torch


class Trainer:
    def __init__(self, encoder, head):
        self.encoder = encoder
        self.head = head
        self.opt = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=0.01)

    def update(self, x, y):
        self.opt.zero_grad()
        feats = torch.tensor(self.encoder(x).tolist())
        out = torch.nn.functional.mse_loss(self.head(feats), y)
        out.backward()
        self.opt.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    encoder = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh())
    tr = Trainer(encoder, torch.nn.Linear(4, 1))
    enc0 = [p.detach().clone() for p in encoder.parameters()]
    for _ in range(3):
        tr.update(torch.randn(8, 3), torch.randn(8, 1))
    assert all(p.requires_grad and p.grad is None for p in encoder.parameters())
    assert all(torch.equal(p, q) for p, q in zip(encoder.parameters(), enc0)), "encoder moved"
    assert tr.head.weight.grad is not None
    print("evidence holds: torch.tensor(.tolist()) froze the encoder (grad None, weights unchanged) although Adam steps it")
