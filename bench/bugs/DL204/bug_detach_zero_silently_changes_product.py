# source: https://github.com/pytorch/pytorch/issues/7860
# category: DL204
# expect: flag 10, 19
# evidence: zeroing x.detach() zeroes x itself; out is 0 and y.grad is [0, 0] with no error, where x = a * b = [2, 6] should give 8 and [2, 6]
import torch


def product_loss(a, b, y):
    x = a * b
    x_detach = x.detach()

    print("x = a * b (a = 2, b = 3)")
    print("x require grad:", x.requires_grad)
    print("x.detach() require grad:", x_detach.requires_grad)
    print("------ Before Fill ------")
    print("x:", x)
    print("x.detach():", x_detach)

    x_detach.zero_()
    print("------ After x.detach().zero_() ------")
    print("x:", x)
    print("x.detach():", x_detach)

    print("out = (x * y).sum()")
    out = (x * y).sum()
    out.backward()
    return out


if __name__ == "__main__":
    torch.manual_seed(0)
    a = torch.tensor([1., 2.], requires_grad=True)
    b = torch.tensor([2., 3.], requires_grad=True)
    y = torch.tensor([1., 1.], requires_grad=True)
    with torch.no_grad():
        expected_out = float(((a * b) * y).sum())  # 8.0, computed before the edit
    out = product_loss(a, b, y)
    assert expected_out == 8.0
    assert out.item() == 0.0  # the loss saw the zeroed x
    assert torch.equal(y.grad, torch.zeros(2))  # d out / d y is x, which the edit zeroed; it should be [2, 6]
    print("evidence holds: the in-place edit of the detached alias silently rewrote x before it was used in the loss")
