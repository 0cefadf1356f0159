# source: placement matrix
# category: DL402
# expect: flag 21
# evidence: Trainer.fit_step calls `.numpy()` on self.body's output, which requires grad, and raises "Can't call numpy() on Tensor that requires grad".
import torch


class Trainer:
    def __init__(self, body, lr):
        self.body = body
        self.updater = torch.optim.RMSprop(self.body.parameters(), lr=lr)
        self.objective = torch.nn.SmoothL1Loss()
        self.trace = []

    def fit_step(self, obs, goal):
        self.updater.zero_grad()
        guess = self.body(obs)
        penalty = self.objective(guess, goal)
        penalty.backward()
        self.updater.step()
        self.trace.append(guess.numpy().mean())


if __name__ == "__main__":
    torch.manual_seed(0)
    tr = Trainer(torch.nn.Linear(4, 1), lr=0.05)
    try:
        tr.fit_step(torch.randn(8, 4), torch.randn(8, 1))
        raised = None
    except RuntimeError as exc:
        raised = str(exc)
    assert raised is not None and "Can't call numpy() on Tensor that requires grad" in raised, raised
    assert tr.trace == []
    print("evidence holds: .numpy() on a tensor that requires grad raises")
