# source: placement matrix
# category: DL502
# expect: clean
# evidence: Trainer.apply_update edits self.body's parameters in place under torch.no_grad(), which runs and changes the weights.
import torch


class Trainer:
    def __init__(self, body, lr):
        self.body = body
        self.lr = lr
        self.objective = torch.nn.SmoothL1Loss()

    def apply_update(self, obs, goal):
        self.body.zero_grad()
        self.objective(self.body(obs), goal).backward()
        with torch.no_grad():
            for param in self.body.parameters():
                param -= self.lr * param.grad


if __name__ == "__main__":
    torch.manual_seed(0)
    tr = Trainer(torch.nn.Linear(4, 1), lr=0.05)
    before = [p.detach().clone() for p in tr.body.parameters()]
    try:
        tr.apply_update(torch.randn(8, 4), torch.randn(8, 1))
        raised = None
    except RuntimeError as exc:
        raised = str(exc)
    assert raised is None, raised
    assert all(not torch.equal(b, p.detach()) for b, p in zip(before, tr.body.parameters()))
    print("evidence holds: manual update under no_grad runs, weights change")
