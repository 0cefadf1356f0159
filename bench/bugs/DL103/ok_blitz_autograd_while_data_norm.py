# source: https://github.com/pytorch/tutorials/blob/05f04cb4463d507cc90f891db82d8c2685e14b53/beginner_source/blitz/autograd_tutorial.py
# category: DL103
# expect: clean
# evidence: reading y.data.norm() only steers the Python while-loop; y keeps its graph and x.grad equals 2**k * gradients exactly.
# -*- coding: utf-8 -*-
"""
Autograd: automatic differentiation
===================================
(tutorial cells, kept in their order; the "crazy things" cell reads y.data)
"""

import torch

###############################################################
# Create a tensor and set requires_grad=True to track computation with it
x = torch.ones(2, 2, requires_grad=True)
print(x)

###############################################################
# Do an operation of tensor:
y = x + 2
print(y)
print(y.grad_fn)

###############################################################
# Do more operations on y
z = y * y * 3
out = z.mean()
print(z, out)

###############################################################
# Gradients
out.backward()
print(x.grad)
first_grad = x.grad.clone()


###############################################################
# You can do many crazy things with autograd!
def crazy_things():
    x = torch.randn(3, requires_grad=True)

    y = x * 2
    n_doublings = 1
    while y.data.norm() < 1000:
        y = y * 2
        n_doublings += 1

    print(y)

    gradients = torch.tensor([0.1, 1.0, 0.0001], dtype=torch.float)
    y.backward(gradients)

    print(x.grad)
    return x, y, gradients, n_doublings


if __name__ == "__main__":
    torch.manual_seed(0)
    assert torch.allclose(first_grad, torch.full((2, 2), 4.5))
    x2, y2, gradients, k = crazy_things()
    with torch.no_grad():
        assert y2.grad_fn is not None
        assert torch.allclose(x2.grad, gradients * (2.0 ** k))
        assert y2.norm().item() >= 1000
    print("evidence holds: the y.data.norm() read does not cut the graph; x.grad is 2**k times the given gradients")
