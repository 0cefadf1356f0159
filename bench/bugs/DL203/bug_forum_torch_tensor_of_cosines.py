# source: https://discuss.pytorch.org/t/gradient-is-lost-when-use-torch-tensor-t1-t2/23261
# category: DL203
# expect: flag 19, 31
# evidence: y1 = cosa + cosb backpropagates to a and b, but y2 built with torch.tensor([cosa, cosb]) has no grad_fn, so y2.sum().backward() raises "element 0 of tensors does not require grad" and a.grad stays None.
import warnings
import torch

warnings.filterwarnings("ignore")
torch.manual_seed(0)

a = torch.tensor(0.0)
b = torch.tensor(0.0)
a.requires_grad = True
b.requires_grad = True
cosa = torch.cos(a)
cosb = torch.cos(b)
y1 = cosa + cosb

y2 = torch.tensor([
    cosa, cosb
])
mat = torch.tensor([
    [1.0, 2.0],
    [3.0, 4.0]
])
y2 = torch.matmul(y2, mat)

if __name__ == "__main__":
    message = ""
    try:
        y2.sum().backward()
    except RuntimeError as e:
        message = str(e)
    assert "does not require grad" in message, message
    assert a.grad is None and b.grad is None
    y1.backward()
    assert a.grad is not None
    print("evidence holds: backward on the torch.tensor-built y2 raises (%s); the y1 path works" % message.split(" and ")[0])
