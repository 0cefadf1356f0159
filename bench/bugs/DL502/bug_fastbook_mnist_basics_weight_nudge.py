# source: https://github.com/fastai/fastbook/pull/471
# category: DL502
# expect: flag 37
# evidence: nudging one weight in place with `weights[0] *= 1.0001` outside no_grad raises "a view of a leaf Variable that requires grad is being used in an in-place operation".
import torch

torch.manual_seed(0)

# stand-ins for the stacked 3s and 7s of MNIST_SAMPLE
threes = torch.rand(20, 28, 28)
sevens = torch.rand(20, 28, 28)
train_x = torch.cat([threes, sevens]).view(-1, 28 * 28)
train_y = torch.tensor([1] * len(threes) + [0] * len(sevens)).unsqueeze(1)
dset = list(zip(train_x, train_y))


def init_params(size, std=1.0):
    return (torch.randn(size) * std).requires_grad_()


weights = init_params((28 * 28, 1))
bias = init_params(1)

(train_x[0] * weights.T).sum() + bias


def linear1(xb):
    return xb @ weights + bias


preds = linear1(train_x)
corrects = (preds > 0.0).float() == train_y
acc_before = corrects.float().mean().item()

cell_error = None
try:
    weights[0] *= 1.0001
    preds = linear1(train_x)
    acc_after = ((preds > 0.0).float() == train_y).float().mean().item()
except RuntimeError as e:
    cell_error = e


if __name__ == "__main__":
    assert cell_error is not None
    msg = str(cell_error)
    assert "leaf Variable that requires grad is being used in an in-place operation" in msg, msg
    assert weights.is_leaf and weights.requires_grad
    print("evidence holds: the weight-nudge cell raised RuntimeError: %s" % msg)
