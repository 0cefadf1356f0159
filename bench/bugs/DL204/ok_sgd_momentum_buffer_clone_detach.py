# source: https://github.com/pytorch/pytorch/blob/main/torch/optim/sgd.py
# category: DL204
# expect: clean
# evidence: the momentum buffer is torch.clone(grad).detach() and then edited in place; the steps match torch.optim.SGD exactly
import torch
from torch import nn
from torch.optim import Optimizer


class MomentumSGD(Optimizer):
    def __init__(self, params, lr=0.1, momentum=0.9, dampening=0.0, weight_decay=0.0, nesterov=False):
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for param in group['params']:
                if param.grad is None:
                    continue
                grad = param.grad
                if group['weight_decay'] != 0:
                    grad = grad.add(param, alpha=group['weight_decay'])
                if group['momentum'] != 0:
                    state = self.state[param]
                    buf = state.get('momentum_buffer')
                    if buf is None:
                        buf = torch.clone(grad).detach()
                        state['momentum_buffer'] = buf
                    else:
                        buf.mul_(group['momentum']).add_(grad, alpha=1 - group['dampening'])
                    if group['nesterov']:
                        grad = grad.add(buf, alpha=group['momentum'])
                    else:
                        grad = buf
                param.add_(grad, alpha=-group['lr'])
        return loss


def fit(model, optimizer, x, y, steps=3):
    for _ in range(steps):
        def closure():
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            return loss
        optimizer.step(closure)


if __name__ == "__main__":
    torch.manual_seed(0)
    ours, ref = nn.Linear(3, 2), nn.Linear(3, 2)
    ref.load_state_dict(ours.state_dict())
    x, y = torch.randn(8, 3), torch.randn(8, 2)
    fit(ours, MomentumSGD(ours.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3), x, y)
    fit(ref, torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3), x, y)
    for p, q in zip(ours.parameters(), ref.parameters()):
        assert torch.allclose(p, q, atol=1e-6)
    print("evidence holds: the in-place momentum update works on a detached clone, never on the gradient itself")
