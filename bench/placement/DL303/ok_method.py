# source: placement matrix
# category: DL303
# expect: clean
# evidence: Trainer.fit_step runs self.body with grad enabled, so backward reaches every parameter and self.updater.step() changes the weights.
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
    assert raised is None, raised
    assert all(p.grad is not None for p in tr.body.parameters())
    assert all(not torch.equal(b, p.detach()) for b, p in zip(before, tr.body.parameters()))
    print("evidence holds: forward with grad -> gradients reach parameters, weights change")
