# source: https://github.com/pytorch/pytorch/blob/main/torch/nn/modules/linear.py
# category: DL502
# expect: clean
# evidence: reset_parameters() fills the weight and bias Parameters through torch.nn.init (which works under no_grad internally): no error, the parameters stay leaves and train
import math

import torch
from torch import nn
from torch.nn import init
import torch.nn.functional as F


class MaskedLinear(nn.Module):
    """A Linear layer with a fixed connectivity mask, initialised like torch's own nn.Linear."""

    def __init__(self, in_features, out_features, mask, bias=True):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = nn.Parameter(torch.empty((out_features, in_features)))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features))
        else:
            self.register_parameter("bias", None)
        self.register_buffer("mask", mask)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight * self.mask, self.bias)


if __name__ == "__main__":
    torch.manual_seed(0)
    mask = (torch.rand(4, 6) > 0.3).float()
    layer = MaskedLinear(6, 4, mask)
    layer.reset_parameters()  # re-initialising later is just as safe
    assert layer.weight.is_leaf and layer.bias.is_leaf
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    before = layer.weight.detach().clone()
    loss = layer(torch.randn(5, 6)).pow(2).mean()
    loss.backward()
    opt.step()
    assert not torch.equal(before, layer.weight.detach())
    print("evidence holds: nn.init fills the parameters in place without error; they remain trainable leaves")
