# source: placement matrix
# category: DL501
# expect: clean
# evidence: Trainer.reset calls requires_grad_() after scaling, so self.kernel is a leaf that gets a gradient and is updated.
import torch


class Trainer:
    def __init__(self, n_in, lr):
        self.n_in = n_in
        self.lr = lr
        self.kernel = None
        self.offset = None
        self.updater = None

    def reset(self):
        self.kernel = (torch.randn(self.n_in, 1) * 0.01).requires_grad_()
        self.offset = torch.zeros(1, requires_grad=True)
        self.updater = torch.optim.RMSprop([self.kernel, self.offset], lr=self.lr)

    def step(self, obs, goal):
        self.updater.zero_grad()
        torch.nn.functional.mse_loss(obs @ self.kernel + self.offset, goal).backward()
        self.updater.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    tr = Trainer(4, lr=0.05)
    try:
        tr.reset()
        start = tr.kernel.detach().clone()
        tr.step(torch.randn(8, 4), torch.randn(8, 1))
        raised = None
    except ValueError as exc:
        raised = str(exc)
    assert raised is None, raised
    assert tr.kernel.is_leaf and tr.kernel.grad is not None
    assert not torch.equal(start, tr.kernel.detach())
    print("evidence holds: self.kernel is a leaf, gets a gradient and is updated")
