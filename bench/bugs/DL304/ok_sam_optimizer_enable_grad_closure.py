# source: https://github.com/davda54/sam/blob/main/sam.py
# category: DL304
# expect: clean
# evidence: torch.enable_grad()(closure) wraps the closure, so inside the @torch.no_grad() step the second forward-backward builds a graph and fills the gradients
import torch
from torch import nn
import torch.nn.functional as F


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, adaptive=False, **kwargs):
        assert rho >= 0.0, f"Invalid rho, should be non-negative: {rho}"
        defaults = dict(rho=rho, adaptive=adaptive, **kwargs)
        super(SAM, self).__init__(params, defaults)
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups
        self.defaults.update(self.base_optimizer.defaults)

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grad_norm = self._grad_norm()
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                self.state[p]["old_p"] = p.detach().clone()
                e_w = (torch.pow(p, 2) if group["adaptive"] else 1.0) * p.grad * scale.to(p)
                p.add_(e_w)  # climb to the local maximum "w + e(w)"
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.copy_(self.state[p]["old_p"])  # get back to "w" from "w + e(w)"
        self.base_optimizer.step()  # do the actual "sharpness-aware" update
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def step(self, closure=None):
        assert closure is not None, "Sharpness Aware Minimization requires closure, but it was not provided"
        closure = torch.enable_grad()(closure)  # the closure should do a full forward-backward pass

        self.first_step(zero_grad=True)
        closure()
        self.second_step()

    def _grad_norm(self):
        shared_device = self.param_groups[0]["params"][0].device
        norm = torch.norm(
            torch.stack([
                ((torch.abs(p) if group["adaptive"] else 1.0) * p.grad).norm(p=2).to(shared_device)
                for group in self.param_groups for p in group["params"]
                if p.grad is not None
            ]),
            p=2,
        )
        return norm


def train(model, optimizer, batches):
    model.train()
    losses = []
    for inputs, targets in batches:
        def closure():
            loss = F.cross_entropy(model(inputs), targets)
            loss.backward()
            return loss

        loss = F.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step(closure)
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    optimizer = SAM(model.parameters(), torch.optim.SGD, lr=0.1, momentum=0.9)
    inputs, targets = torch.randn(32, 6), torch.randint(0, 3, (32,))
    before = [p.detach().clone() for p in model.parameters()]
    losses = train(model, optimizer, [(inputs, targets)] * 20)
    assert torch.is_grad_enabled()
    assert all(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
    assert losses[-1] < losses[0]
    print("evidence holds: the closure backpropagates inside the no_grad step; loss %.3f -> %.3f" % (losses[0], losses[-1]))
