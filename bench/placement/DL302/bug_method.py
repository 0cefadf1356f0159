# source: placement matrix
# category: DL302
# expect: flag 18
# evidence: Trainer.step runs forward, loss and backward inside torch.no_grad(), so the loss has no grad_fn, backward raises "element 0 of tensors does not require grad and does not have a grad_fn" and self.body never changes.
import torch


class Trainer:
    def __init__(self):
        self.body = torch.nn.Linear(3, 2)
        self.updater = torch.optim.Adam(self.body.parameters(), lr=0.01)

    def step(self, xs, ys):
        self.updater.zero_grad()
        with torch.no_grad():
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
    assert caught is not None
    assert "element 0 of tensors does not require grad and does not have a grad_fn" in caught
    assert torch.equal(tr.body.weight.detach(), start)
    print("evidence holds: backward under torch.no_grad() in Trainer.step raises; body unchanged")
