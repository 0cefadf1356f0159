# source: placement matrix
# category: DL205
# expect: clean
# evidence: Learner.update takes feats.detach() as a stop-gradient target while feats stays in the graph, so self.body gets gradients and changes.
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
        target = feats.detach()
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
    assert ln.body.weight.grad is not None and ln.top.weight.grad is not None
    assert not torch.equal(ln.body.weight.detach(), start)
    print("evidence holds: with detach() self.body still gets gradients and changes")
