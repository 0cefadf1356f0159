# source: https://github.com/lucidrains/lion-pytorch/blob/main/lion_pytorch/lion_pytorch.py
# category: DL502
# expect: clean
# evidence: step() is decorated with @torch.no_grad(), so the in-place mul_/add_ that update_fn applies to the requires_grad parameters raise nothing and the weights move
from typing import Callable, Optional, Tuple

import torch
from torch.optim.optimizer import Optimizer


def exists(val):
    return val is not None


def update_fn(p, grad, exp_avg, lr, wd, beta1, beta2):
    # stepweight decay
    p.mul_(1. - lr * wd)
    # weight update
    update = exp_avg.clone().mul_(beta1).add(grad, alpha=1. - beta1).sign_()
    p.add_(update, alpha=-lr)
    # decay the momentum running average coefficient
    exp_avg.mul_(beta2).add_(grad, alpha=1. - beta2)


class Lion(Optimizer):
    def __init__(self, params, lr: float = 1e-4, betas: Tuple[float, float] = (0.9, 0.99), weight_decay: float = 0.0):
        assert lr > 0.
        assert all([0. <= beta <= 1. for beta in betas])
        defaults = dict(lr=lr, betas=betas, weight_decay=weight_decay)
        super().__init__(params, defaults)
        self.update_fn = update_fn

    @torch.no_grad()
    def step(self, closure: Optional[Callable] = None):
        loss = None
        if exists(closure):
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in filter(lambda p: exists(p.grad), group['params']):
                grad, lr, wd, beta1, beta2, state = p.grad, group['lr'], group['weight_decay'], *group['betas'], self.state[p]
                if len(state) == 0:
                    state['exp_avg'] = torch.zeros_like(p)
                exp_avg = state['exp_avg']
                self.update_fn(p, grad, exp_avg, lr, wd, beta1, beta2)
        return loss


def train(model, data, targets, steps=3):
    opt = Lion(model.parameters(), lr=1e-2, weight_decay=1e-2)
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(model(data), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


if __name__ == "__main__":
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    before = [p.detach().clone() for p in model.parameters()]
    train(model, torch.randn(8, 4), torch.randn(8, 2))
    assert all(p.is_leaf and p.requires_grad for p in model.parameters())
    assert all(not torch.equal(b, p.detach()) for b, p in zip(before, model.parameters()))
    print("evidence holds: the decorated step() updates the parameters in place without the leaf error")
