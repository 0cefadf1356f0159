# source: placement matrix
# category: DL501
# expect: flag 17
# evidence: Trainer.reset scales a requires_grad factory result into self.kernel, a non-leaf that the optimizer refuses ("can't optimize a non-leaf Tensor").
import torch


class Trainer:
    def __init__(self, n_in, lr):
        self.n_in = n_in
        self.lr = lr
        self.kernel = None
        self.offset = None
        self.updater = None

    def reset(self):
        self.kernel = torch.randn(self.n_in, 1, requires_grad=True) * 0.01
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
        tr.step(torch.randn(8, 4), torch.randn(8, 1))
        raised = None
    except ValueError as exc:
        raised = str(exc)
    assert not tr.kernel.is_leaf and tr.kernel.grad_fn is not None
    assert raised is not None and "can't optimize a non-leaf Tensor" in raised, raised
    print("evidence holds: self.kernel is a non-leaf; the optimizer refuses it")
