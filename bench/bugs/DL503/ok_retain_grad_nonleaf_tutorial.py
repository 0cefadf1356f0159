# source: https://github.com/pytorch/tutorials/blob/main/beginner_source/understanding_leaf_vs_nonleaf_tutorial.py
# category: DL503
# expect: clean
# evidence: the non-leaf tensors z, y_pred and loss call retain_grad() before backward, so reading z.grad / y_pred.grad / loss.grad returns real gradients (z.grad equals b.grad).
"""
Understanding requires_grad, retain_grad, Leaf, and Non-leaf Tensors
(retain_grad section of the tutorial)
"""

import torch
import torch.nn.functional as F

# tensor setup
x = torch.ones(1, 3)                      # input with shape: (1, 3)
W = torch.ones(3, 2, requires_grad=True)  # weights with shape: (3, 2)
b = torch.ones(1, 2, requires_grad=True)  # bias with shape: (1, 2)
y = torch.ones(1, 2)                      # output with shape: (1, 2)

# prints True because new tensors are leafs by convention
print(f"{x.is_leaf=}")

# forward pass
z = (x @ W) + b                           # pre-activation with shape: (1, 2)
y_pred = F.relu(z)                        # activation with shape: (1, 2)
loss = F.mse_loss(y_pred, y)              # scalar loss

# tell PyTorch to store the gradients after backward()
z.retain_grad()
y_pred.retain_grad()
loss.retain_grad()

# backpropagation
loss.backward()

# print gradients for all tensors that have requires_grad=True
print(f"{W.grad=}")
print(f"{b.grad=}")
print(f"{z.grad=}")
print(f"{y_pred.grad=}")
print(f"{loss.grad=}")


if __name__ == "__main__":
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any "non-leaf .grad accessed" warning would fail here
        assert not z.is_leaf and z.retains_grad and z.grad is not None
        assert torch.allclose(z.grad, b.grad)
        assert y_pred.grad is not None and loss.grad.item() == 1.0
    print("evidence holds: retained non-leaf grads are populated, z.grad =", z.grad.tolist())
