# source: https://devgem.io/posts/understanding-autograd-and-model-pruning-in-pytorch
# category: DL102
# expect: flag 26
# evidence: after `layer.weight.data = layer.weight.data[:, :90]` the next backward raises "Function TBackward0 returned an invalid gradient at index 0 - got [10, 90] but expected shape compatible with [10, 100]"
import torch
import torch.nn as nn


class Net(nn.Module):
    def __init__(self, n_in=100, n_out=10):
        super(Net, self).__init__()
        self.layer = nn.Linear(n_in, n_out)

    def forward(self, x):
        return self.layer(x)


def input_importance(model, inputs):
    # score each input feature by the magnitude of the weights that read it
    x = model(inputs)
    scores = model.layer.weight.abs().sum(0)
    return x, scores


def prune_inputs(layer, keep):
    layer.weight.data = layer.weight.data[:, :keep]
    layer.in_features = keep


def finetune_step(model, inputs, target, criterion, keep):
    out = model(inputs[:, :keep])
    loss = criterion(out, target)
    loss.backward()
    return loss


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Net()
    inputs = torch.randn(8, 100)
    target = torch.randn(8, 10)
    x, scores = input_importance(model, inputs)
    prune_inputs(model.layer, 90)
    try:
        finetune_step(model, inputs, target, nn.MSELoss(), 90)
    except RuntimeError as err:
        msg = str(err)
        assert "returned an invalid gradient at index 0 - got [10, 90] but expected shape compatible with [10, 100]" in msg, msg
    else:
        raise AssertionError("backward should reject the gradient of the re-bound weight")
    print("evidence holds: backward after the .data re-bind raised the invalid-gradient error")
