# source: https://ajkdrag.in/2-Zettels/detach-trick-for-straight-through-estimators
# category: DL201
# expect: clean
# evidence: binary_with_ste detaches the binarised weights but adds x - x.detach(), so the latent weights still receive a gradient of ones through the straight-through path and the optimizer changes them.
import torch
import torch.nn as nn

torch.manual_seed(0)


def binary_with_ste(x):
    # Forward: binary step function
    # Backward: identity gradient
    return (x > 0).float().detach() + x - x.detach()


class BinaryLinear(nn.Module):
    """Linear layer whose latent real-valued weights are binarised in the forward pass."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_features, in_features) * 0.1)

    def forward(self, x):
        w_bin = binary_with_ste(self.weight)
        return x @ w_bin.t()


if __name__ == "__main__":
    x = torch.tensor([0.6, -0.2, 1.5, -1.0], requires_grad=True)
    y = binary_with_ste(x)
    y.sum().backward()
    assert torch.equal(y.detach(), torch.tensor([1.0, 0.0, 1.0, 0.0]))
    assert torch.equal(x.grad, torch.ones(4))

    layer = BinaryLinear(4, 3)
    opt = torch.optim.SGD(layer.parameters(), lr=0.5)
    inputs, target = torch.randn(8, 4), torch.randn(8, 3)
    before = layer.weight.detach().clone()
    for _ in range(3):
        opt.zero_grad()
        loss = ((layer(inputs) - target) ** 2).mean()
        loss.backward()
        opt.step()
    assert layer.weight.grad is not None and layer.weight.grad.abs().sum().item() > 0
    with torch.no_grad():
        assert not torch.equal(before, layer.weight)
    print("evidence holds: STE passes ones-gradient through and the latent binary weights are trained")
