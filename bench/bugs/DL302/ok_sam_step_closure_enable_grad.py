# source: https://github.com/davda54/sam/blob/main/sam.py
# category: DL302
# expect: clean
# evidence: SAM.step runs under @torch.no_grad() but wraps the closure in torch.enable_grad(), so the closure's second forward-backward fills fresh gradients and the weights move
import torch
import torch.nn as nn
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
                e_w = (torch.pow(p, 2) if group["adaptive"] else 1.0) * p.grad * scale.to(p)
                p.add_(e_w)  # climb to the local maximum "w + e(w)"
                self.state[p]["e_w"] = e_w
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.sub_(self.state[p]["e_w"])  # get back to "w" from "w + e(w)"
        self.base_optimizer.step()  # the actual "sharpness-aware" update
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def step(self, closure=None):
        assert closure is not None, "Sharpness Aware Minimization requires closure, but it was not provided"
        closure = torch.enable_grad()(closure)  # the closure does a full forward-backward pass
        self.first_step(zero_grad=True)
        closure()
        self.second_step()

    def _grad_norm(self):
        shared_device = self.param_groups[0]["params"][0].device
        return torch.norm(
            torch.stack([
                ((torch.abs(p) if group["adaptive"] else 1.0) * p.grad).norm(p=2).to(shared_device)
                for group in self.param_groups for p in group["params"]
                if p.grad is not None
            ]),
            p=2,
        )


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def train(model, loader, epochs=2):
    loss_function = nn.CrossEntropyLoss()
    optimizer = SAM(model.parameters(), torch.optim.SGD, lr=0.1, momentum=0.9)
    history = []
    for _ in range(epochs):
        for input, output in loader:
            def closure():
                loss = loss_function(model(input), output)
                loss.backward()
                return loss

            loss = loss_function(model(input), output)
            loss.backward()
            optimizer.step(closure)
            optimizer.zero_grad()
            history.append(loss.item())
    return history


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Net()
    loader = [(torch.randn(8, 6), torch.randint(0, 3, (8,))) for _ in range(4)]
    w0 = model.fc1.weight.detach().clone()

    seen = []
    model.fc2.weight.register_hook(lambda g: seen.append(torch.is_grad_enabled()))
    history = train(model, loader)

    assert not torch.equal(w0, model.fc1.weight.detach())
    assert len(seen) == 2 * len(history)  # both backward passes per step reached the parameters
    assert all(torch.isfinite(torch.tensor(history)))
    print("evidence holds: the closure's backward inside the no_grad step runs with grad enabled and SAM updates the weights")
