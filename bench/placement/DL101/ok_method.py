# source: placement matrix
# category: DL101
# expect: clean
# evidence: the clamp in Trainer.step is an out-of-place op autograd differentiates, so the trained weights equal the reference training with the visible clamp.
import copy
import torch


class Trainer:
    def __init__(self, body, lr):
        self.body = body
        self.updater = torch.optim.SGD(self.body.parameters(), lr=lr)
        self.bce = torch.nn.BCELoss()

    def step(self, xb, yb):
        self.updater.zero_grad()
        conf = torch.sigmoid(self.body(xb))
        conf = conf.clamp(0.05, 0.95)
        self.bce(conf, yb).backward()
        self.updater.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    body = torch.nn.Sequential(torch.nn.Linear(4, 1))
    stream = [(torch.randn(16, 4) * 3, torch.randint(0, 2, (16, 1)).float()) for _ in range(3)]
    twin = copy.deepcopy(body)
    tr = Trainer(body, lr=0.5)
    for xb, yb in stream:
        tr.step(xb, yb)
    twin_opt = torch.optim.SGD(twin.parameters(), lr=0.5)
    for xb, yb in stream:
        twin_opt.zero_grad()
        torch.nn.BCELoss()(torch.sigmoid(twin(xb)).clamp(0.05, 0.95), yb).backward()
        twin_opt.step()
    same = all(torch.allclose(a, b) for a, b in zip(body.parameters(), twin.parameters()))
    assert same, "weights differ from the reference training"
    print("evidence holds: gradients are those of the computed loss (weights equal the visible-clamp run)")
