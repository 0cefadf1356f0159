# source: placement matrix
# category: DL201
# expect: flag 16
# evidence: Classifier.forward detaches the encoder's output, so the encoder parameters that Adam owns get grad None and stay unchanged while the head trains.
import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(6, 5), nn.ReLU())
        self.head = nn.Linear(5, 3)

    def forward(self, x):
        feats = self.encoder(x).detach()
        return self.head(feats)


if __name__ == "__main__":
    torch.manual_seed(0)
    clf = Classifier()
    opt = torch.optim.Adam([*clf.encoder.parameters(), *clf.head.parameters()], lr=0.01)
    enc0 = [p.detach().clone() for p in clf.encoder.parameters()]
    for _ in range(3):
        opt.zero_grad()
        nn.functional.cross_entropy(clf(torch.randn(8, 6)), torch.randint(0, 3, (8,))).backward()
        opt.step()
    assert all(p.requires_grad and p.grad is None for p in clf.encoder.parameters())
    assert all(torch.equal(p, q) for p, q in zip(clf.encoder.parameters(), enc0)), "encoder moved"
    assert clf.head.weight.grad is not None
    print("evidence holds: .detach() in forward froze the encoder (grad None, weights unchanged) although Adam steps it")
