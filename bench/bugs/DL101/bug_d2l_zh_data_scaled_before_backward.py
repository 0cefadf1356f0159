# source: https://github.com/ShusenTang/Dive-into-DL-PyTorch/issues/126
# category: DL101
# expect: flag 16
# evidence: scaling x.data between forward and backward is not "invisible to backprop": for y = x ** 2 the gradient comes out 200 instead of 2, because PowBackward reads the edited x
import torch


def make_leaf():
    x = torch.ones(1, requires_grad=True)
    return x


def square_then_rescale(x, factor=100):
    """The tutorial's recipe: change the value of x without autograd recording it."""
    y = x ** 2
    x.data *= factor  # only changes the value, not recorded in the graph
    y.backward()
    return y


def square_reference():
    x = torch.ones(1, requires_grad=True)
    y = x ** 2
    y.backward()
    return x.grad


if __name__ == "__main__":
    torch.manual_seed(0)
    x = make_leaf()
    y = square_then_rescale(x)
    expected = square_reference()
    assert torch.equal(y.detach(), torch.tensor([1.0])), "the forward value was computed with x = 1"
    assert torch.equal(expected, torch.tensor([2.0]))
    assert torch.equal(x.grad, torch.tensor([200.0])), x.grad
    print("evidence holds: dy/dx for y = x ** 2 at x = 1 came out %.0f instead of 2" % x.grad.item())
