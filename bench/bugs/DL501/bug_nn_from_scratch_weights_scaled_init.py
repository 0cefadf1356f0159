# source: https://github.com/pytorch/tutorials/pull/3717
# category: DL501
# expect: flag 13, 39, 41
# evidence: weights = randn(requires_grad=True) / sqrt(784) is a non-leaf; after loss.backward() weights.grad is None and the manual update in fit() dies with a TypeError
import math

import torch
import torch.nn.functional as F

bs = 16
lr = 0.5
epochs = 1
weights = torch.randn(784, 10, requires_grad=True) / math.sqrt(784)
bias = torch.zeros(10, requires_grad=True)


def log_softmax(x):
    return x - x.exp().sum(-1).log().unsqueeze(-1)


def model(xb):
    return log_softmax(xb @ weights + bias)


def nll(input, target):
    return -input[range(target.shape[0]), target].mean()


def fit(x_train, y_train):
    global weights, bias
    n = x_train.shape[0]
    for epoch in range(epochs):
        for i in range((n - 1) // bs + 1):
            xb = x_train[i * bs:i * bs + bs]
            yb = y_train[i * bs:i * bs + bs]
            loss = nll(model(xb), yb)
            loss.backward()
            with torch.no_grad():
                weights -= weights.grad * lr
                bias -= bias.grad * lr
                weights.grad.zero_()
                bias.grad.zero_()
    return loss


if __name__ == "__main__":
    torch.manual_seed(0)
    x_train = torch.randn(32, 784)
    y_train = torch.randint(0, 10, (32,))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fit(x_train, y_train)
            raised = None
        except TypeError as e:
            raised = str(e)
    assert not weights.is_leaf
    assert raised is not None and "NoneType" in raised, raised
    assert bias.grad is not None  # the bias, created as a leaf, did get its gradient
    print("evidence holds: the scaled weights are a non-leaf; weights.grad is None and the SGD step crashes")
