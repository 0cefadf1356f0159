# source: placement matrix
# category: DL501
# expect: flag 10
# evidence: fit_linear() scales a requires_grad factory result, making a non-leaf that the optimizer refuses ("can't optimize a non-leaf Tensor").
import torch
import torch.nn as nn


def fit_linear(xs, ys, lr, steps):
    weight = torch.randn(xs.shape[1], 1, requires_grad=True) * 0.01
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
        fit_linear(xs, ys, lr=0.05, steps=3)
        raised = None
    except ValueError as exc:
        raised = str(exc)
    assert raised is not None and "can't optimize a non-leaf Tensor" in raised, raised
    print("evidence holds: scaled factory result is a non-leaf; the optimizer refuses it")
