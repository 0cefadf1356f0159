# source: placement matrix
# category: DL501
# expect: clean
# evidence: the helper calls requires_grad_() after scaling, so the caller's optimizer accepts the leaf and a step updates it.
import torch
from torch import nn


def init_weight(rows, cols, scale):
    return (torch.randn(rows, cols) * scale).requires_grad_()


def build(n_in, n_out, lr):
    theta = init_weight(n_in, n_out, 0.01)
    shift = torch.zeros(n_out, requires_grad=True)
    momentum_sgd = torch.optim.SGD([theta, shift], lr=lr, momentum=0.9)
    return theta, shift, momentum_sgd


if __name__ == "__main__":
    torch.manual_seed(0)
    try:
        theta, shift, momentum_sgd = build(4, 3, lr=0.1)
        raised = None
    except ValueError as exc:
        raised = str(exc)
    assert raised is None, raised
    start = theta.detach().clone()
    momentum_sgd.zero_grad()
    nn.functional.cross_entropy(torch.randn(8, 4) @ theta + shift, torch.randint(0, 3, (8,))).backward()
    momentum_sgd.step()
    assert theta.is_leaf and theta.grad is not None
    assert not torch.equal(start, theta.detach())
    print("evidence holds: the helper's weight is a leaf, gets a gradient and is updated")
