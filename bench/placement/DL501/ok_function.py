# source: placement matrix
# category: DL501
# expect: clean
# evidence: fit_linear() calls requires_grad_() after scaling, so the weight is a leaf that gets a gradient and is updated.
import torch
import torch.nn as nn


def fit_linear(xs, ys, lr, steps):
    weight = (torch.randn(xs.shape[1], 1) * 0.01).requires_grad_()
    bias = torch.zeros(1, requires_grad=True)
    opt = torch.optim.Adam([weight, bias], lr=lr)
    crit = nn.MSELoss()
    for _ in range(steps):
        opt.zero_grad()
        crit(xs @ weight + bias, ys).backward()
        opt.step()
    return weight, bias


if __name__ == "__main__":
    torch.manual_seed(0)
    xs, ys = torch.randn(8, 4), torch.randn(8, 1)
    try:
        weight, bias = fit_linear(xs, ys, lr=0.05, steps=3)
        raised = None
    except ValueError as exc:
        raised = str(exc)
    assert raised is None, raised
    assert weight.is_leaf and weight.grad is not None and bias.grad is not None
    print("evidence holds: weight is a leaf, gets a gradient and is updated")
