# source: https://discuss.pytorch.org/t/layer-weight-vs-weight-data/24271
# category: DL201
# expect: clean
# evidence: the weight entry is set inside a torch.no_grad() block as the forum answer recommends, yet backward still fills lin.weight.grad and SGD steps change the weight.
import torch
import torch.nn as nn


torch.manual_seed(0)

# Forum answer: manipulate the weight under no_grad instead of through .data,
# then use the layer normally; autograd still tracks the parameter afterwards.
lin = nn.Linear(10, 2)
with torch.no_grad():
    lin.weight[0][0] = 1.

x = torch.randn(1, 10)
output = lin(x)
output.mean().backward()


def train_steps(layer, steps=3):
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    for _ in range(steps):
        optimizer.zero_grad()
        out = layer(torch.randn(4, 10))
        loss = out.pow(2).mean()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    assert lin.weight.grad is not None, "weight received no gradient"
    assert lin.weight.grad.abs().sum().item() > 0
    assert lin.weight[0][0].item() == 1.0
    before = lin.weight.detach().clone()
    train_steps(lin)
    with torch.no_grad():
        changed = (lin.weight - before).abs().max().item()
    assert changed > 0, "training did not change the weight"
    print("evidence holds: weight edited under no_grad still gets gradients "
          "(grad sum %.4f) and training moves it by %.4f" %
          (lin.weight.grad.abs().sum().item(), changed))
