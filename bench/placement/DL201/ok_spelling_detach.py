# source: placement matrix
# category: DL201
# expect: clean
# evidence: Classifier.forward feeds the encoder's output to the head uncut, so the encoder gets gradients and Adam moves it.
import torch
from torch import nn


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(6, 5), nn.ReLU())
        self.head = nn.Linear(5, 3)

    def forward(self, x):
        feats = self.encoder(x)
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
    assert all(p.grad is not None for p in clf.encoder.parameters())
    assert not any(torch.equal(p, q) for p, q in zip(clf.encoder.parameters(), enc0)), "encoder frozen"
    assert clf.head.weight.grad is not None
    print("evidence holds: gradients reach the encoder and Adam trains it")
