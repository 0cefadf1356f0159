# source: placement matrix
# category: DL201
# expect: clean
# evidence: train() passes the backbone's features to the classifier uncut, so the backbone parameters get gradients and the optimizer moves them.
import torch
import torch.nn as nn


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(1, 2, 3)

    def forward(self, x):
        return torch.relu(self.conv(x)).flatten(1)


def train(bb, clf, opt, batches):
    for sig, lab in batches:
        opt.zero_grad()
        z = bb(sig)
        cost = nn.functional.cross_entropy(clf(z), lab)
        cost.backward()
        opt.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    bb, clf = Backbone(), nn.Linear(8, 2)
    opt = torch.optim.SGD([{"params": bb.parameters(), "lr": 0.01}, {"params": clf.parameters()}], lr=0.1)
    data = [(torch.randn(4, 1, 6), torch.randint(0, 2, (4,))) for _ in range(3)]
    w0, c0 = bb.conv.weight.detach().clone(), clf.weight.detach().clone()
    train(bb, clf, opt, data)
    assert bb.conv.weight.grad is not None and bb.conv.bias.grad is not None
    assert not torch.equal(bb.conv.weight, w0), "backbone frozen"
    assert not torch.equal(clf.weight, c0)
    print("evidence holds: gradients reach the backbone and the optimizer trains it")
