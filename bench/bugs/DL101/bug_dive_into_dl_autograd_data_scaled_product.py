# source: https://github.com/ShusenTang/Dive-into-DL-PyTorch/issues/12
# category: DL101
# expect: flag 23
# evidence: after x.data *= 100 between forward and backward, y = 2*x*x gives x.grad 202 and y = 2*x*x*x gives 20202 instead of the analytic 4 and 6: MulBackward reads the edited x
import torch


def inspect_data(x):
    """The notebook's first cell: .data is still a tensor, outside the graph."""
    return x.data, x.data.requires_grad


def build(x, power):
    # the reader's variations on the notebook's y = 2 * x
    y = 2 * x
    for _ in range(power - 1):
        y = y * x
    return y


def rescale_then_backward(x, power):
    y = build(x, power)
    x.data *= 100  # "only changes the value, not recorded in the graph, so backprop is unaffected"
    y.backward()
    return y


def analytic_grad(power, x0=1.0):
    return 2.0 * power * x0 ** (power - 1)


def tracked_grad(power):
    """Same function, no .data edit: what autograd should return at x = 1."""
    x = torch.ones(1, requires_grad=True)
    build(x, power).backward()
    return x.grad


if __name__ == "__main__":
    torch.manual_seed(0)
    observed = {}
    for power in (2, 3):
        x = torch.ones(1, requires_grad=True)
        data, data_requires_grad = inspect_data(x)
        assert data_requires_grad is False
        y = rescale_then_backward(x, power)
        assert torch.equal(y.detach(), torch.tensor([2.0])), "the forward value was computed with x = 1"
        assert torch.equal(x.detach(), torch.tensor([100.0])), "the edit reached x itself"
        assert torch.equal(tracked_grad(power), torch.tensor([analytic_grad(power)]))
        observed[power] = x.grad.item()

    assert observed[2] == 202.0, observed
    assert observed[3] == 20202.0, observed
    print("evidence holds: x.grad is %.0f for 2*x*x (analytic 4) and %.0f for 2*x*x*x (analytic 6)"
          % (observed[2], observed[3]))
