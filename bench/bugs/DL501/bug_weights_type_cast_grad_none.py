# source: https://github.com/pytorch/pytorch/issues/10065
# category: DL501
# expect: flag 21, 27
# evidence: after backward the cast weights w1 that the program inspects have grad None at every step, while the hidden float64 leaf w got the gradient
import numpy as np
import torch


def load_initial_weights():
    # weights come from a numpy config: float64
    return np.array([1.0, 2.0, 3.0])


def weighted_mean(w1, samples):
    o = torch.mean(samples @ w1)
    return o


def fit(samples, targets, steps=3):
    w = torch.tensor(load_initial_weights(), requires_grad=True)
    w1 = w.type(torch.float)
    grads = []
    for _ in range(steps):
        o = weighted_mean(w1, samples)
        loss = (o - targets.mean()) ** 2
        loss.backward()
        grads.append(w1.grad)
    return w, w1, grads


if __name__ == "__main__":
    torch.manual_seed(0)
    samples = torch.randn(5, 3)
    targets = torch.randn(5)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        w, w1, grads = fit(samples, targets)
    assert not w1.is_leaf and w1.grad_fn is not None
    assert all(g is None for g in grads)
    assert w.grad is not None and w.grad.abs().sum() > 0
    print("evidence holds: w1 = w.type(torch.float) is a non-leaf copy; its grad stays None, the gradient went to the hidden leaf")
