# source: placement matrix
# category: DL204
# expect: flag 18
# evidence: Trainer.step scales a detached alias of the sigmoid output in place, which edits the tensor autograd saved, so backward raises "one of the variables needed for gradient computation has been modified by an inplace operation".
import torch


class Trainer:
    def __init__(self):
        self.body = torch.nn.Linear(4, 2)
        self.updater = torch.optim.Adam(self.body.parameters(), lr=0.01)
        self.shown = []

    def step(self, obs, goal):
        self.updater.zero_grad()
        rate = torch.sigmoid(self.body(obs))
        pct = rate.detach()
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
    assert caught is not None and "modified by an inplace operation" in caught
    assert torch.equal(tr.body.weight.detach(), start)
    print("evidence holds: scaling the detached alias in Trainer.step breaks backward")
