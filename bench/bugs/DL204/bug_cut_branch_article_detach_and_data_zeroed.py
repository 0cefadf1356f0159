# source: https://squarezhong.notion.site/detach-source-03c14f7f8b6846fdbaa36d254557c2b3
# category: DL204
# expect: flag 29, 30, 33, 39, 40, 43
# evidence: after c.zero_() on out.detach(), out.sum().backward() raises "modified by an inplace operation"; with out.data instead, a.grad comes out all zeros with no error
import torch


def sigmoid_branch(a):
    # the branch whose output is read back through a detached handle
    return a.sigmoid()


def backward_plain(a):
    out = sigmoid_branch(a)
    out.sum().backward()
    return a.grad


def backward_detach_untouched(a):
    out = sigmoid_branch(a)
    c = out.detach()  # c.requires_grad is False; c is never edited
    print("c:", c)
    out.sum().backward()
    return a.grad


def backward_detach_edited(a):
    out = sigmoid_branch(a)
    c = out.detach()
    c.zero_()  # the edit goes through to out as well
    print("c:", c)
    print("out:", out)
    out.sum().backward()
    return a.grad


def backward_data_edited(a):
    out = sigmoid_branch(a)
    c = out.data
    c.zero_()  # not tracked by autograd: no error, wrong gradient
    print("c:", c)
    print("out:", out)
    out.sum().backward()
    return a.grad


if __name__ == "__main__":
    torch.manual_seed(0)
    a = torch.tensor([1, 2, 3.], requires_grad=True)
    true_grad = backward_plain(a).clone()
    assert torch.allclose(true_grad, torch.tensor([0.1966, 0.1050, 0.0452]), atol=1e-4)

    a = torch.tensor([1, 2, 3.], requires_grad=True)
    assert torch.equal(backward_detach_untouched(a), true_grad)

    a = torch.tensor([1, 2, 3.], requires_grad=True)
    try:
        backward_detach_edited(a)
    except RuntimeError as err:
        assert "modified by an inplace operation" in str(err)
    else:
        raise AssertionError("backward should notice the zero_() made through out.detach()")

    a = torch.tensor([1, 2, 3.], requires_grad=True)
    wrong_grad = backward_data_edited(a)
    assert torch.equal(wrong_grad, torch.zeros(3)) and (true_grad > 0.04).all()
    print("evidence holds: zeroing out.detach() breaks backward with an in-place error; zeroing out.data silently gives a.grad = 0 instead of sigmoid'")
