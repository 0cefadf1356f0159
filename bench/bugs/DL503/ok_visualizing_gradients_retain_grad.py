# source: https://github.com/pytorch/tutorials/blob/main/advanced_source/visualizing_gradients_tutorial.py
# category: DL503
# expect: clean
# evidence: z, y_pred and loss call retain_grad() before backward, so their .grad are populated (z.grad equals the analytic value) and no non-leaf warning is raised
import warnings

import torch
import torch.nn.functional as F


def forward_pass(x, W, b, y):
    z = (x @ W) + b
    y_pred = F.relu(z)
    loss = F.mse_loss(y_pred, y)
    return z, y_pred, loss


def inspect_intermediate_grads(x, W, b, y):
    z, y_pred, loss = forward_pass(x, W, b, y)
    z.retain_grad()
    y_pred.retain_grad()
    loss.retain_grad()
    loss.backward()
    grads = {
        "loss": loss.grad,
        "y_pred": y_pred.grad,
        "z": z.grad,
        "W": W.grad,
        "b": b.grad,
    }
    for name, g in grads.items():
        print(f"{name}.grad = {g}")
    return z, y_pred, grads


if __name__ == "__main__":
    x = torch.ones(1, 3)
    W = torch.ones(3, 2, requires_grad=True)
    b = torch.ones(1, 2, requires_grad=True)
    y = torch.ones(1, 2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        z, y_pred, grads = inspect_intermediate_grads(x, W, b, y)
    assert not any("not a leaf Tensor" in str(w.message) for w in caught)
    assert all(g is not None for g in grads.values())
    # d loss / d y_pred = 2 * (y_pred - y) / 2 = (4 - 1) = 3 per element; relu passes it to z
    assert torch.allclose(grads["z"], torch.full((1, 2), 3.0))
    print("evidence holds: retain_grad() makes the intermediate .grad values available and correct")
