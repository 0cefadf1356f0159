# source: https://github.com/Redmoon-2333/Deep_Learning/blob/f6cd3c706270f56c0558b549bc6f3410532c67ab/ch06_pytorch_base/9_detach_vs_data.ipynb
# category: DL204
# expect: flag 17, 21, 27
# evidence: z1 = y1.data then z1.zero_() zeroes y1; y1.sum().backward() runs without error and x1.grad is [0, 0, 0] instead of sigmoid'(x1)
import torch


def compare_detach_and_data(x1, x2):
    # two identical inputs, one handle through .data and one through .detach()
    y1 = x1.sigmoid()
    y2 = x2.sigmoid()
    print("y1 (from x1):", y1)
    print("y2 (from x2):", y2)

    # .data is the old API, .detach() the recommended one;
    # neither handle requires grad
    z1 = y1.data
    z2 = y2.detach()
    print("z1.requires_grad (.data):", z1.requires_grad)
    print("z2.requires_grad (.detach()):", z2.requires_grad)
    z1.zero_()
    z2.zero_()
    print("y1 after zero_:", y1)
    print("y2 after zero_:", y2)

    # backward through y1 to check the gradient
    y1.sum().backward()
    return x1.grad


if __name__ == "__main__":
    torch.manual_seed(0)
    x1 = torch.tensor([1.0, 2, 3], requires_grad=True)
    x2 = torch.tensor([1.0, 2, 3], requires_grad=True)
    grad = compare_detach_and_data(x1, x2)

    with torch.no_grad():
        s = torch.tensor([1.0, 2, 3]).sigmoid()
        expected = s * (1 - s)  # [0.1966, 0.1050, 0.0452]
    assert torch.equal(grad, torch.zeros(3))
    assert (expected > 0.04).all()
    assert x2.grad is None  # y2 was never used for backward
    print("evidence holds: the zero_() through y1.data silently rewrote y1 and backward gave x1.grad = 0 instead of sigmoid'(x1)")
