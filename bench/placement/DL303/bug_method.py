# source: placement matrix
# category: DL303
# expect: flag 25, 26, 28
# evidence: Trainer.fit_step runs self.body under torch.no_grad(), so backward raises "does not require grad" and self.updater.step() never changes the weights.
import torch


class Regressor(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 1)

    def forward(self, x):
        return self.lin(x)


class Trainer:
    def __init__(self, body, lr):
        self.body = body
        self.updater = torch.optim.RMSprop(self.body.parameters(), lr=lr)
        self.objective = torch.nn.SmoothL1Loss()

    def fit_step(self, obs, goal):
        self.updater.zero_grad()
        with torch.no_grad():
            guess = self.body(obs)
        penalty = self.objective(guess, goal)
        penalty.backward()
        self.updater.step()
        return penalty.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    tr = Trainer(Regressor(), lr=0.05)
    before = [p.detach().clone() for p in tr.body.parameters()]
    try:
        tr.fit_step(torch.randn(8, 4), torch.randn(8, 1))
        raised = None
    except RuntimeError as exc:
        raised = str(exc)
    assert raised is not None and "does not require grad" in raised, raised
    assert all(torch.equal(b, p.detach()) for b, p in zip(before, tr.body.parameters()))
    print("evidence holds: forward under no_grad -> backward raises, weights unchanged")
