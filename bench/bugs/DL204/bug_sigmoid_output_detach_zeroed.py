# source: https://github.com/pytorch/pytorch/issues/6990
# category: DL204
# expect: flag 14, 15, 17, 22, 23
# evidence: zeroing out.detach() makes backward raise "modified by an inplace operation"; zeroing out.data instead gives a.grad all zeros, silently wrong
import torch


def gate(a):
    return a.sigmoid()


def backward_after_detach_edit(a):
    out = gate(a)
    c = out.detach()
    c.zero_()
    print("out after c.zero_():", out)  # modified by c.zero_() too
    out.sum().backward()


def backward_after_data_edit(a):
    out = gate(a)
    c = out.data
    c.zero_()
    print("out after c.zero_():", out)
    out.sum().backward()


if __name__ == "__main__":
    torch.manual_seed(0)
    a = torch.tensor([1, 2, 3.], requires_grad=True)
    try:
        backward_after_detach_edit(a)
    except RuntimeError as err:
        assert "one of the variables needed for gradient computation has been modified by an inplace operation" in str(err)
    else:
        raise AssertionError("backward should notice the edit through .detach()")

    a = torch.tensor([1, 2, 3.], requires_grad=True)
    backward_after_data_edit(a)
    with torch.no_grad():
        s = torch.tensor([1, 2, 3.]).sigmoid()
        true_grad = s * (1 - s)
    assert torch.equal(a.grad, torch.zeros(3)) and (true_grad > 0.04).all()
    print("evidence holds: the alias edit overwrote the sigmoid output saved for backward (an error via detach, wrong zeros via .data)")
