# source: placement matrix
# category: DL101
# expect: flag 23
# evidence: the in-place clamp through .data overwrites the sigmoid output saved for backward, so train() leaves weights different from the same training with the clamp visible to autograd.
import copy
import torch
import torch.nn as nn


class Scorer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)


def train(f, sgd, batches):
    for inp, tgt in batches:
        sgd.zero_grad()
        p = torch.sigmoid(f(inp))
        p.data.clamp_(0.05, 0.95)
        nn.functional.binary_cross_entropy(p, tgt).backward()
        sgd.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    f = Scorer()
    data = [(torch.randn(16, 4) * 3, torch.randint(0, 2, (16, 1)).float()) for _ in range(3)]
    ref = copy.deepcopy(f)
    train(f, torch.optim.SGD(f.parameters(), lr=0.5), data)
    ref_sgd = torch.optim.SGD(ref.parameters(), lr=0.5)
    for inp, tgt in data:
        ref_sgd.zero_grad()
        nn.functional.binary_cross_entropy(torch.sigmoid(ref(inp)).clamp(0.05, 0.95), tgt).backward()
        ref_sgd.step()
    same = all(torch.allclose(a, b) for a, b in zip(f.parameters(), ref.parameters()))
    assert not same, "weights match the reference: the hidden clamp changed nothing"
    print("evidence holds: the .data clamp silently corrupted the gradients (weights differ from the visible-clamp run)")
