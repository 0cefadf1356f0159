# source: https://github.com/pytorch/pytorch/blob/main/torch/optim/optimizer.py
# category: DL205
# expect: clean
# evidence: after a create_graph backward the gradients carry a grad_fn; zero_grad's p.grad.detach_() cuts them in place and the next steps train normally
import torch
from torch import nn


class PlainSGD(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    def zero_grad(self, set_to_none: bool = False):
        for group in self.param_groups:
            for p in group['params']:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        if p.grad.grad_fn is not None:
                            p.grad.detach_()
                        else:
                            p.grad.requires_grad_(False)
                        p.grad.zero_()

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group['params']:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group['lr'])


def train(model, optimizer, x, y, steps=3, grad_penalty=0.1):
    history = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        (g,) = torch.autograd.grad(loss, model.weight, create_graph=True)
        total = loss + grad_penalty * g.pow(2).sum()
        total.backward(create_graph=True)
        history.append(model.weight.grad.grad_fn is not None)
        optimizer.step()
    optimizer.zero_grad()
    return history


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    optimizer = PlainSGD(model.parameters(), lr=0.05)
    x, y = torch.randn(16, 3), torch.randn(16, 1)
    before = model.weight.detach().clone()
    history = train(model, optimizer, x, y)
    assert all(history)  # every step produced gradients with a graph behind them
    assert model.weight.grad.grad_fn is None and not model.weight.grad.any()  # zero_grad cut and zeroed them
    assert not torch.equal(before, model.weight)
    print("evidence holds: detach_ on p.grad (not a view, no other holder) safely drops the double-backward graph")
