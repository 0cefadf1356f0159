# source: https://github.com/vinsis/ternary-quantization/issues/4
# category: DL501
# expect: clean
# evidence: the scaling factors are created on the device with requires_grad=True, so they are leaves: Adam accepts them and they move after a step
import torch
import torch.nn as nn
import torch.nn.functional as F

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def quantize(weight, scaling_factor, threshold=0.05):
    delta = threshold * weight.abs().max()
    pos = (weight > delta).float()
    neg = (weight < -delta).float()
    return scaling_factor[0] * pos - scaling_factor[1] * neg


def quantized_forward(model, x, scaling_factors):
    w1 = quantize(model.fc1.weight, scaling_factors[0])
    w2 = quantize(model.fc2.weight, scaling_factors[1])
    h = F.relu(F.linear(x, w1, model.fc1.bias))
    return F.linear(h, w2, model.fc2.bias)


def train(model, loader, epochs=1):
    weights_to_be_quantized = [model.fc1.weight, model.fc2.weight]
    scaling_factors = [torch.ones(2, requires_grad=True, device=device) for _ in range(len(weights_to_be_quantized))]
    optimizer_sf = torch.optim.Adam(scaling_factors, lr=0.01)
    for epoch in range(epochs):
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            optimizer_sf.zero_grad()
            output = quantized_forward(model, data, scaling_factors)
            loss = F.cross_entropy(output, target)
            loss.backward()
            optimizer_sf.step()
    return scaling_factors


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Net().to(device)
    loader = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(3)]
    scaling_factors = train(model, loader)
    for sf in scaling_factors:
        assert sf.is_leaf and sf.grad is not None
        assert not torch.equal(sf.detach(), torch.ones(2))
    print("evidence holds: the device= scaling factors are leaves and Adam trains them")
