# source: placement matrix
# category: DL101
# expect: flag 18
# evidence: the in-place clamp through .data in Trainer.step overwrites the sigmoid output saved for backward, so the trained weights differ from the same training with the clamp visible to autograd.
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
        conf.data.clamp_(0.05, 0.95)
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
    assert not same, "weights match the reference: the hidden clamp changed nothing"
    print("evidence holds: the .data clamp silently corrupted the gradients (weights differ from the visible-clamp run)")
