# source: https://github.com/fastai/course-v3/issues/455
# category: DL402
# expect: clean
# evidence: after fitting the line with the Parameter a, the predictions x@a are plotted (converted to numpy) inside torch.no_grad(), so they carry no grad and the conversion works; the animation frames do the same
import numpy as np
import torch
from torch import nn

figure = {"scatter": [], "line": None}


def tensor(x, *rest):
    """fastai's helper: tensor(3., 2) builds a 1-d float tensor."""
    return torch.tensor([x, *rest]) if rest else torch.tensor(x)


def scatter(xs, ys):
    """Stand-in for plt.scatter: matplotlib turns both arguments into numpy arrays."""
    figure["scatter"].append((np.asarray(xs), np.asarray(ys)))


class Line:
    def __init__(self, xs, ys):
        self.xs, self.ys = np.asarray(xs), np.asarray(ys)

    def set_ydata(self, ys):
        self.ys = np.asarray(ys)


def mse(y_hat, y):
    return ((y_hat - y) ** 2).mean()


n = 100
x = torch.ones(n, 2)
y = None
a = None
lr = 1e-1


def update(t):
    y_hat = x @ a
    loss = mse(y, y_hat)
    loss.backward()
    with torch.no_grad():
        a.sub_(lr * a.grad)
        a.grad.zero_()
    return loss.item()


def animate(i, line):
    update(i)
    with torch.no_grad():
        line.set_ydata(x @ a)
    return line,


if __name__ == "__main__":
    torch.manual_seed(0)
    x[:, 0].uniform_(-1., 1)
    a_true = tensor(3., 2)
    y = x @ a_true + torch.rand(n)
    a = nn.Parameter(tensor(-1., 1))

    losses = [update(t) for t in range(100)]
    scatter(x[:, 0], y)
    with torch.no_grad():
        scatter(x[:, 0], x @ a)

    a = nn.Parameter(tensor(-1., 1))
    with torch.no_grad():
        line = Line(x[:, 0], x @ a)
    for i in range(5):
        animate(i, line)

    assert losses[-1] < losses[0] / 10
    assert len(figure["scatter"]) == 2 and figure["scatter"][1][1].shape == (n,)
    assert line.ys.shape == (n,)
    print("evidence holds: the fitted predictions are converted for plotting under no_grad without error")
