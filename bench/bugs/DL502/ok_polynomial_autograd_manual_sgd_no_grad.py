# source: https://github.com/pytorch/tutorials/blob/main/beginner_source/examples_autograd/polynomial_autograd.py
# category: DL502
# expect: clean
# evidence: the in-place updates of the requires_grad leaves a, b, c, d run under torch.no_grad(): no error, and the fitted loss drops
import math

import torch

dtype = torch.float
device = torch.device("cpu")


def fit(steps=200, learning_rate=1e-6):
    x = torch.linspace(-math.pi, math.pi, 200, device=device, dtype=dtype)
    y = torch.sin(x)

    a = torch.randn((), device=device, dtype=dtype, requires_grad=True)
    b = torch.randn((), device=device, dtype=dtype, requires_grad=True)
    c = torch.randn((), device=device, dtype=dtype, requires_grad=True)
    d = torch.randn((), device=device, dtype=dtype, requires_grad=True)

    losses = []
    for t in range(steps):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum()
        losses.append(loss.item())
        loss.backward()

        with torch.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad

            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None

    print(f'Result: y = {a.item()} + {b.item()} x + {c.item()} x^2 + {d.item()} x^3')
    return (a, b, c, d), losses


if __name__ == "__main__":
    torch.manual_seed(0)
    params, losses = fit()
    assert all(p.is_leaf and p.requires_grad for p in params)
    assert losses[-1] < losses[0] * 0.5
    print("evidence holds: the manual SGD step under no_grad updates the leaves without error and the loss falls")
