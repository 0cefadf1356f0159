# source: https://github.com/pytorch/tutorials/blob/main/beginner_source/examples_autograd/polynomial_custom_function.py
# category: DL701
# expect: clean
# evidence: a torch.autograd.Function subclass with ctx.save_for_backward and leaf tensors made with requires_grad=True (no Variable): its backward matches autograd's own derivative and the fit improves
import math

import torch


class LegendrePolynomial3(torch.autograd.Function):
    """P3(x) = 1/2 (5x^3 - 3x), with a hand-written backward."""

    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return 0.5 * (5 * input ** 3 - 3 * input)

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return grad_output * 1.5 * (5 * input ** 2 - 1)


def fit(steps=300, learning_rate=5e-6):
    dtype = torch.float
    device = torch.device("cpu")
    x = torch.linspace(-math.pi, math.pi, 2000, device=device, dtype=dtype)
    y = torch.sin(x)

    # weights: y = a + b * P3(c + d * x)
    a = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
    b = torch.full((), -1.0, device=device, dtype=dtype, requires_grad=True)
    c = torch.full((), 0.0, device=device, dtype=dtype, requires_grad=True)
    d = torch.full((), 0.3, device=device, dtype=dtype, requires_grad=True)

    losses = []
    for t in range(steps):
        P3 = LegendrePolynomial3.apply
        y_pred = a + b * P3(c + d * x)
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
    return (a, b, c, d), losses


if __name__ == "__main__":
    torch.manual_seed(0)
    inp = torch.randn(6, dtype=torch.double, requires_grad=True)
    assert torch.autograd.gradcheck(LegendrePolynomial3.apply, (inp,))
    params, losses = fit()
    assert all(p.is_leaf and p.requires_grad for p in params)
    assert losses[-1] < 0.5 * losses[0]
    print("evidence holds: the custom Function's gradient is exact and the fit loss falls {:.1f} -> {:.1f}".format(losses[0], losses[-1]))
