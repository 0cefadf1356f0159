# source: placement matrix
# category: DL501
# expect: flag 10
# evidence: the helper returns a scaled requires_grad factory result, a non-leaf, and the caller's optimizer refuses it ("can't optimize a non-leaf Tensor").
import torch
from torch import nn


def init_weight(rows, cols, scale):
    return torch.randn(rows, cols, requires_grad=True) * scale


def build(n_in, n_out, lr):
    theta = init_weight(n_in, n_out, 0.01)
    shift = torch.zeros(n_out, requires_grad=True)
    momentum_sgd = torch.optim.SGD([theta, shift], lr=lr, momentum=0.9)
    return theta, shift, momentum_sgd


if __name__ == "__main__":
    torch.manual_seed(0)
    try:
        build(4, 3, lr=0.1)
        raised = None
    except ValueError as exc:
        raised = str(exc)
    assert raised is not None and "can't optimize a non-leaf Tensor" in raised, raised
    assert not init_weight(4, 3, 0.01).is_leaf
    print("evidence holds: the helper's weight is a non-leaf; the caller's optimizer refuses it")
