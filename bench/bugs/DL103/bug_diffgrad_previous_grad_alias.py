# source: https://github.com/shivram1987/diffGrad/issues/2
# category: DL103
# expect: flag 30, 57
# evidence: from the 2nd step on, state['previous_grad'] is the very storage of p.grad (`grad = p.grad.data`), so when zero_grad()/backward refill p.grad in place it already equals the new gradient: |previous_grad - grad| is 0 and the friction coefficient is 0.5 everywhere, while the true gradient change is not 0 and the weights end up different from the diffGrad computed with copies
import math

import torch
import torch.nn as nn
from torch.optim.optimizer import Optimizer


class diffgrad(Optimizer):
    """diffGrad, an Adam variant whose step is damped by sigmoid(|g_t - g_{t-1}|)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0):
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        super(diffgrad, self).__init__(params, defaults)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()

        for group in self.param_groups:
            for p in group['params']:
                if p.grad is None:
                    continue
                grad = p.grad.data

                state = self.state[p]
                if len(state) == 0:
                    state['step'] = 0
                    state['exp_avg'] = torch.zeros_like(p.data)
                    state['exp_avg_sq'] = torch.zeros_like(p.data)
                    # Previous gradient
                    state['previous_grad'] = torch.zeros_like(p.data)

                exp_avg, exp_avg_sq, previous_grad = state['exp_avg'], state['exp_avg_sq'], state['previous_grad']
                beta1, beta2 = group['betas']
                state['step'] += 1

                if group['weight_decay'] != 0:
                    grad.add_(p.data, alpha=group['weight_decay'])

                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                denom = exp_avg_sq.sqrt().add_(group['eps'])

                bias_correction1 = 1 - beta1 ** state['step']
                bias_correction2 = 1 - beta2 ** state['step']

                # compute diffgrad coefficient (dfc)
                diff = abs(previous_grad - grad)
                dfc = 1. / (1. + torch.exp(-diff))
                state['previous_grad'] = grad

                # update momentum with dfc
                exp_avg1 = exp_avg * dfc
                step_size = group['lr'] * math.sqrt(bias_correction2) / bias_correction1
                p.data.addcdiv_(exp_avg1, denom, value=-step_size)

        return loss


def train_regression(model, optimizer, x, y, steps, on_backward=None):
    criterion = nn.MSELoss()
    for it in range(steps):
        # what optimizer.zero_grad() did in 2020: zero p.grad in place
        optimizer.zero_grad(set_to_none=False)
        loss = criterion(model(x), y)
        loss.backward()
        if on_backward is not None:
            on_backward(it)
        optimizer.step()
    return model


def reference_diffgrad(w0, grads_fn, steps, lr, betas=(0.9, 0.999), eps=1e-8):
    """The same update with the previous gradient kept as a copy."""
    w = w0.clone()
    m, v, prev = torch.zeros_like(w), torch.zeros_like(w), torch.zeros_like(w)
    for t in range(1, steps + 1):
        g = grads_fn(w)
        m = betas[0] * m + (1 - betas[0]) * g
        v = betas[1] * v + (1 - betas[1]) * g * g
        dfc = torch.sigmoid((prev - g).abs())
        prev = g.clone()
        step_size = lr * math.sqrt(1 - betas[1] ** t) / (1 - betas[0] ** t)
        w = w - step_size * (m * dfc) / (v.sqrt() + eps)
    return w


if __name__ == "__main__":
    torch.manual_seed(0)
    x = torch.randn(16, 3)
    y = x @ torch.tensor([[1.5], [-2.0], [0.5]]) + 0.3
    model = nn.Linear(3, 1, bias=False)
    w0 = model.weight.detach().clone()
    opt = diffgrad(model.parameters(), lr=0.1)

    seen = {}

    def check_previous(it):
        g = model.weight.grad.detach().clone()
        if it >= 1:
            prev = opt.state[model.weight]['previous_grad']
            seen[it] = (torch.equal(prev, g), (seen['last'] - g).abs().max().item())
        seen['last'] = g

    train_regression(model, opt, x, y, steps=6, on_backward=check_previous)
    for it in range(1, 6):
        aliased, true_change = seen[it]
        assert aliased, "previous_grad should already hold the new gradient"
        assert true_change > 1e-3, true_change

    def grads_fn(w):
        w = w.detach().requires_grad_(True)
        loss = nn.functional.mse_loss(x @ w.t(), y)
        return torch.autograd.grad(loss, w)[0]

    w_ref = reference_diffgrad(w0, grads_fn, steps=6, lr=0.1)
    assert not torch.allclose(model.weight.detach(), w_ref, atol=1e-5), (model.weight, w_ref)
    print("evidence holds: previous_grad aliases p.grad, so |g_t - g_{t-1}| reads 0 while the true change is > 1e-3, and the weights differ from diffGrad with copies")
