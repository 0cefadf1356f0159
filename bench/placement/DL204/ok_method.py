# source: placement matrix
# category: DL204
# expect: clean
# evidence: Trainer.step scales a clone of the sigmoid output, so the saved tensor stays intact, backward runs and self.body gets gradients.
import torch


class Trainer:
    def __init__(self):
        self.body = torch.nn.Linear(4, 2)
        self.updater = torch.optim.Adam(self.body.parameters(), lr=0.01)
        self.shown = []

    def step(self, obs, goal):
        self.updater.zero_grad()
        rate = torch.sigmoid(self.body(obs))
        pct = rate.detach().clone()
        pct.mul_(100)
        self.shown.append(pct.mean().item())
        objective = ((rate - goal) ** 2).mean()
        objective.backward()
        self.updater.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    tr = Trainer()
    start = tr.body.weight.detach().clone()
    caught = None
    try:
        for _ in range(3):
            tr.step(torch.randn(6, 4), torch.rand(6, 2))
    except RuntimeError as e:
        caught = str(e)
    assert caught is None and len(tr.shown) == 3
    assert tr.body.weight.grad is not None
    assert not torch.equal(tr.body.weight.detach(), start)
    print("evidence holds: the cloned alias is scaled safely; Trainer.step changes self.body")
