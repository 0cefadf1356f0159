# source: https://github.com/pytorch/pytorch/issues/1760
# category: DL503
# expect: flag 29
# evidence: forward() stores the torch.cat result as self.y; it is a non-leaf, so after backward model.y.grad is None although the gradient reached the leaf inputs.
import warnings

import torch
import torch.nn as nn
from torch.autograd import Variable


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.fc0 = nn.Linear(3, 5)

    def forward(self, x):
        x = torch.cat(x)
        self.y = x
        x = self.fc0(self.y)
        return x


def inspect_input_saliency(model, x):
    output = model(x)
    output[0][0].backward()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        y_grad = model.y.grad
    print(y_grad)
    return y_grad


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Net()
    x = [Variable(torch.Tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]]), requires_grad=True) for i in range(3)]
    y_grad = inspect_input_saliency(model, x)

    assert y_grad is None
    assert not model.y.is_leaf and model.y.requires_grad
    assert x[0].grad is not None and x[0].grad.abs().sum() > 0
    print("evidence holds: model.y.grad is None (non-leaf, grad_fn=%s) while x[0].grad=%s"
          % (type(model.y.grad_fn).__name__, x[0].grad[0].tolist()))
