# source: https://github.com/mit-ll-responsible-ai/responsible-ai-toolbox/issues/24
# category: DL504
# expect: flag 30, 58
# evidence: freeze() given the scaled perturbation scale * base (a non-leaf) calls requires_grad_(False) on it and raises "you can only change requires_grad flags of leaf variables. If you want to use a computed variable ..."
from contextlib import contextmanager

import torch
import torch.nn as nn
import torch.nn.functional as F


def _iter_params(items):
    for item in items:
        if isinstance(item, nn.Module):
            yield from item.parameters()
        elif isinstance(item, torch.Tensor):
            yield item
        else:
            for sub in item:
                yield sub


def freeze(*items):
    """Set requires_grad=False on the given tensors/modules; returns a callable that restores their state."""
    param_states = {}
    for param in _iter_params(items):
        if param not in param_states:
            # a parameter may appear twice: keep its original state
            param_states[param] = param.requires_grad
            param.requires_grad_(False)

    def restore_state():
        for p, requires_grad in param_states.items():
            p.requires_grad_(requires_grad)
    return restore_state


@contextmanager
def frozen(*items):
    restore = freeze(*items)
    try:
        yield
    finally:
        restore()


def perturbation_step(model, delta, x, y):
    """Gradient for the perturbation only: the model is frozen for this step."""
    with frozen(model):
        loss = F.cross_entropy(model(x + delta), y)
        grad, = torch.autograd.grad(loss, delta)
    return grad


def evaluate_scaled(model, base, x, y, scale=2.0):
    """Score a scaled copy of the perturbation with everything frozen."""
    delta = scale * base
    with frozen(model, delta):
        return F.cross_entropy(model(x + delta), y).item()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    x, y = torch.randn(5, 4), torch.randint(0, 3, (5,))
    base = torch.zeros(5, 4, requires_grad=True)
    grad = perturbation_step(model, base, x, y)  # works: base is a leaf
    assert grad is not None and all(p.requires_grad for p in model.parameters())
    try:
        evaluate_scaled(model, base, x, y)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised is not None and raised.startswith("you can only change requires_grad flags of leaf variables."), raised
    assert "var.detach()" in raised
    print("evidence holds: freeze() calls requires_grad_(False) on the computed scale * base and raises")
