# source: placement matrix
# category: DL201
# expect: flag 16
# evidence: Learner.step detaches self.trunk's output before self.head, so the trunk parameters that self.updater owns get grad None and stay unchanged.
import torch


class Learner:
    def __init__(self, trunk, head):
        self.trunk = trunk
        self.head = head
        self.updater = torch.optim.SGD(list(trunk.parameters()) + list(head.parameters()), lr=0.1)

    def step(self, xb, yb):
        self.updater.zero_grad()
        h = self.trunk(xb).detach()
        err = torch.nn.functional.mse_loss(self.head(h), yb)
        err.backward()
        self.updater.step()
        return err.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    trunk = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Tanh())
    learner = Learner(trunk, torch.nn.Linear(4, 1))
    before = [p.detach().clone() for p in trunk.parameters()]
    for _ in range(3):
        learner.step(torch.randn(8, 5), torch.randn(8, 1))
    assert all(p.requires_grad and p.grad is None for p in trunk.parameters())
    assert all(torch.equal(p, b) for p, b in zip(trunk.parameters(), before)), "trunk moved"
    assert learner.head.weight.grad is not None
    print("evidence holds: the detach froze the trunk (grad None, weights unchanged) although the updater steps it")
