# source: https://github.com/d2l-ai/d2l-en/issues/989
# category: DL204
# expect: flag 26, 27
# evidence: u = y.detach() is used as MXNet's y.copy(), but it shares y's storage and version counter; scaling u in place changes y and the later z.sum().backward() raises "one of the variables needed for gradient computation has been modified by an inplace operation"
import torch

torch.manual_seed(0)

# 2.5.1 A Simple Example
x = torch.arange(4.0)
x.requires_grad_(True)  # Same as `x = torch.arange(4.0, requires_grad=True)`
y = 2 * torch.dot(x, x)
y.backward()
grad_ok = torch.equal(x.grad, 4 * x)

# 2.5.2 Backward for Non-Scalar Variables
x.grad.zero_()
y = x * x
y.sum().backward()  # Faster: y.sum().backward()
grad_ok = grad_ok and torch.equal(x.grad, 2 * x)

# 2.5.3 Detaching Computation, written with detach() standing in for MXNet's copy()
x.grad.zero_()
y = x * x
z = y * x
u = y.detach()     # "copy" of y
u /= u.max()       # normalise the copy for display
print("u:", u, "y:", y)

if __name__ == "__main__":
    y_changed = torch.equal(y.detach(), u)
    try:
        z.sum().backward()
        err = None
    except RuntimeError as e:
        err = str(e)
    assert grad_ok and y_changed
    assert err is not None and "modified by an inplace operation" in err, err
    print("evidence holds: y was rescaled through its 'copy' and z.sum().backward() raised: " + err.split(":")[0])
