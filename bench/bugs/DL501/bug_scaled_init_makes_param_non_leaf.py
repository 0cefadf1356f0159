# source: https://github.com/pytorch/pytorch/issues/91851
# category: DL501
# expect: flag 13, 24
# evidence: `a` is the result of multiplying a requires_grad leaf by 0.1, so it is a non-leaf: after backward a.grad is None (and `a` cannot be updated from it), while `b`, a true leaf, gets its gradient.
import warnings

import torch

torch.manual_seed(0)
warnings.simplefilter("ignore", UserWarning)  # the non-leaf .grad access warning

# calibration: scale `a` starts at 0.5, shift `b` at 2.0
a = torch.tensor(5.0, requires_grad=True) * 0.1
b = torch.tensor(2.0, requires_grad=True)

x = torch.linspace(0, 1, 8)
y = 3.0 * x + 1.0
lr = 0.1

c = a * x + b
loss = ((c - y) ** 2).mean()
loss.backward()

print(a.grad, b.grad)
grads = {"a": a.grad, "b": b.grad}
with torch.no_grad():
    b -= lr * b.grad
    if a.grad is not None:
        a -= lr * a.grad


if __name__ == "__main__":
    assert not a.is_leaf and b.is_leaf
    assert grads["a"] is None and grads["b"] is not None
    assert abs(a.item() - 0.5) < 1e-7 and b.item() != 2.0
    print("evidence holds: a.grad is None (a stuck at %.2f, grad_fn=%s) while b.grad=%.3f and b was updated"
          % (a.item(), type(a.grad_fn).__name__, grads["b"].item()))
