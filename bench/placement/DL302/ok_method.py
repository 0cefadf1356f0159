# source: placement matrix
# category: DL302
# expect: clean
# evidence: Trainer.step runs forward, loss and backward with grad mode on, so backward succeeds, self.body gets gradients and Adam moves its weights.
import torch


class Trainer:
    def __init__(self):
        self.body = torch.nn.Linear(3, 2)
        self.updater = torch.optim.Adam(self.body.parameters(), lr=0.01)

    def step(self, xs, ys):
        self.updater.zero_grad()
        emitted = self.body(xs)
        objective = ((emitted - ys) ** 2).mean()
        objective.backward()
        self.updater.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    tr = Trainer()
    start = tr.body.weight.detach().clone()
    caught = None
    try:
        for _ in range(3):
            tr.step(torch.randn(5, 3), torch.randn(5, 2))
    except RuntimeError as e:
        caught = str(e)
    assert caught is None
    assert tr.body.weight.grad is not None
    assert not torch.equal(tr.body.weight.detach(), start)
    print("evidence holds: Trainer.step backpropagates into self.body and its weights change")
