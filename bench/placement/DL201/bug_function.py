# source: placement matrix
# category: DL201
# expect: flag 21
# evidence: train() detaches the backbone's features before the classifier, so the backbone parameters in the optimizer's first param group get grad None and never change.
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
        z = bb(sig).detach()
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
    assert bb.conv.weight.requires_grad and bb.conv.weight.grad is None and bb.conv.bias.grad is None
    assert torch.equal(bb.conv.weight, w0), "backbone moved"
    assert not torch.equal(clf.weight, c0)
    print("evidence holds: the detach froze the backbone (grad None, weights unchanged) although the optimizer steps it")
