# source: placement matrix
# category: DL205
# expect: flag 18
# evidence: Learner.update calls feats.detach_(), which cuts feats itself, so self.body gets no gradient (grad None) and self.updater steps it for nothing.
import torch


class Learner:
    def __init__(self):
        self.body = torch.nn.Linear(3, 4)
        self.top = torch.nn.Linear(4, 4)
        params = list(self.body.parameters()) + list(self.top.parameters())
        self.updater = torch.optim.Adam(params, lr=0.01)

    def update(self, obs):
        self.updater.zero_grad()
        feats = self.body(obs)
        target = feats.detach_()
        out = self.top(feats)
        objective = ((out - target) ** 2).mean()
        objective.backward()
        self.updater.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    ln = Learner()
    start = ln.body.weight.detach().clone()
    for _ in range(3):
        ln.update(torch.randn(6, 3))
    assert ln.body.weight.grad is None and ln.top.weight.grad is not None
    assert torch.equal(ln.body.weight.detach(), start)
    print("evidence holds: after detach_() in Learner.update self.body gets no gradient")
