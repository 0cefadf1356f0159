# source: https://github.com/DeepRank/deeprank/issues/175
# category: DL701
# expect: clean
# evidence: _get_conv_output probes the conv stack with a plain torch.rand tensor (no Variable wrapper): the flattened size is right, the probe leaves no gradient behind, and the generated model trains
import torch
import torch.nn as nn
import torch.nn.functional as F


class cnn_reg(nn.Module):
    """Model as emitted by the model generator: conv features, then a linear regressor."""

    def __init__(self, input_shape):
        super(cnn_reg, self).__init__()
        self.convlayer_000 = nn.Conv3d(input_shape[0], 4, kernel_size=2)
        self.convlayer_001 = nn.MaxPool3d((2, 2, 2))
        self.convlayer_002 = nn.Conv3d(4, 5, kernel_size=2)
        size = self._get_conv_output(input_shape)
        self.fclayer_000 = nn.Linear(size, 8)
        self.fclayer_001 = nn.Linear(8, 1)

    def _get_conv_output(self, shape):
        inp = torch.rand(1, *shape)
        out = self._forward_features(inp)
        return out.view(1, -1).size(1)

    def _forward_features(self, x):
        x = F.relu(self.convlayer_000(x))
        x = self.convlayer_001(x)
        x = F.relu(self.convlayer_002(x))
        return x

    def forward(self, x):
        x = self._forward_features(x)
        x = x.view(x.size(0), -1)
        x = F.relu(self.fclayer_000(x))
        return self.fclayer_001(x)


def train(net, data, epochs=5, lr=0.01):
    optimizer = torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
    criterion = nn.MSELoss()
    losses = []
    for epoch in range(epochs):
        for inputs, targets in data:
            optimizer.zero_grad()
            outputs = net(inputs)
            loss = criterion(outputs, targets)
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
    return losses


if __name__ == "__main__":
    torch.manual_seed(0)
    input_shape = (2, 9, 9, 9)
    net = cnn_reg(input_shape)

    assert net.fclayer_000.in_features == 5 * 3 * 3 * 3
    assert all(p.grad is None for p in net.parameters())  # the size probe did not leave gradients behind

    data = [(torch.randn(4, *input_shape), torch.randn(4, 1)) for _ in range(3)]
    losses = train(net, data)
    assert all(p.grad is not None for p in net.parameters())
    assert sum(losses[-3:]) < sum(losses[:3])
    print("evidence holds: the plain-tensor probe sizes the regressor and the generated model trains")
