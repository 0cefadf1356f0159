# source: https://github.com/pytorch/pytorch/issues/5949
# category: DL102
# expect: flag 13
# evidence: assigning layer.weight.data = torch.randn(100, 100) silently swaps the parameter's storage for one of another shape; the module still reports Linear(in_features=10, out_features=10) but the next forward raises a shape-mismatch RuntimeError.
import torch
import torch.nn as nn
from torch.autograd import Variable

torch.manual_seed(0)

x = Variable(torch.randn(1, 10))
layer = nn.Linear(10, 10, bias=False)
layer.weight.data = torch.randn(100, 100)

if __name__ == "__main__":
    assert "in_features=10, out_features=10" in repr(layer)
    assert tuple(layer.weight.shape) == (100, 100)
    message = ""
    try:
        x = torch.randn(1, 10)
        layer(Variable(x))
    except RuntimeError as e:
        message = str(e)
    assert "cannot be multiplied" in message or "size mismatch" in message, message
    print("evidence holds: %r holds a (100, 100) weight; forward fails: %s" % (layer, message))
