# source: https://rubsky.top/post/tensor%E5%92%8Cstack%E5%9C%A8%E6%B1%82%E5%AF%BC%E6%97%B6%E7%9A%84%E5%8C%BA%E5%88%AB/
# category: DL201
# expect: flag 24
# evidence: the network's predicted angle theta is copied into a new leaf by torch.tensor([[cos, -sin], [sin, cos]], requires_grad=True), so after backward every AngleNet parameter has grad None and SGD never changes them.
import torch
import torch.nn as nn

torch.manual_seed(0)


class AngleNet(nn.Module):
    """The network predicts one rotation angle theta per sample."""

    def __init__(self, in_dim=4, hidden=8):
        super().__init__()
        self.fc = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.fc(x).squeeze(-1)


def rotation_matrix(theta):
    # build the 2x2 rotation matrix from the predicted angle for later computation
    R = torch.tensor([[torch.cos(theta), -torch.sin(theta)],
                      [torch.sin(theta), torch.cos(theta)]], requires_grad=True)
    return R


def train(net, feats, points, targets, steps=5, lr=0.1):
    optimizer = torch.optim.SGD(net.parameters(), lr=lr)
    loss = None
    for step in range(steps):
        optimizer.zero_grad()
        loss = 0.0
        for f, p, t in zip(feats, points, targets):
            theta = net(f.unsqueeze(0))[0]
            R = rotation_matrix(theta)
            rotated = p @ R.T
            loss = loss + ((rotated - t) ** 2).mean()
        loss.backward()
        optimizer.step()
    return loss


if __name__ == "__main__":
    net = AngleNet()
    feats = torch.randn(3, 4)
    points = torch.randn(3, 5, 2)
    true_theta = torch.tensor([0.3, -0.5, 1.0])
    targets = torch.stack([
        p @ torch.stack([torch.stack([torch.cos(a), -torch.sin(a)]),
                         torch.stack([torch.sin(a), torch.cos(a)])]).T
        for p, a in zip(points, true_theta)
    ])
    before = [p.detach().clone() for p in net.parameters()]
    train(net, feats, points, targets)
    assert all(p.grad is None for p in net.parameters()), "gradient reached AngleNet"
    with torch.no_grad():
        assert all(torch.equal(b, p) for b, p in zip(before, net.parameters()))
    print("evidence holds: AngleNet parameters have grad None and are unchanged after 5 SGD steps")
