# source: placement matrix
# category: DL203
# expect: flag 18
# evidence: Trainer.step backpropagates a loss computed from a detached output, which raises "element 0 of tensors does not require grad and does not have a grad_fn" and leaves self.body unchanged.
import torch


class Trainer:
    def __init__(self):
        self.body = torch.nn.Linear(3, 2)
        self.updater = torch.optim.Adam(self.body.parameters(), lr=0.01)
        self.crit = torch.nn.MSELoss()

    def step(self, xs, ys):
        self.updater.zero_grad()
        emitted = self.body(xs).detach()
        objective = self.crit(emitted, ys)
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
    print("evidence holds: Trainer.step raises on backward of a detached-only loss; body unchanged")
