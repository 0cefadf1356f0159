# source: https://github.com/locuslab/fast_adversarial/blob/master/CIFAR10/train_fgsm.py
# category: DL101
# expect: clean
# evidence: the perturbation delta is a leaf edited only between its backward and the next forward: it stays inside the epsilon ball and the valid pixel range, and the model trains on the adversarial batch
import torch
import torch.nn as nn
import torch.nn.functional as F

mu = torch.tensor([0.4914, 0.4822, 0.4465]).view(3, 1, 1)
std = torch.tensor([0.2471, 0.2435, 0.2616]).view(3, 1, 1)
upper_limit = ((1 - mu) / std)
lower_limit = ((0 - mu) / std)


def clamp(X, lower_limit, upper_limit):
    return torch.max(torch.min(X, upper_limit), lower_limit)


class PreActNet(nn.Module):
    def __init__(self, num_classes=10):
        super(PreActNet, self).__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.linear = nn.Linear(8, num_classes)

    def forward(self, x):
        out = F.relu(self.bn(self.conv1(x)))
        return self.linear(F.adaptive_avg_pool2d(out, 1).flatten(1))


def train_epoch(model, opt, criterion, train_loader, epsilon, alpha, batch_size):
    delta = torch.zeros(batch_size, 3, 8, 8)
    model.train()
    for i, (X, y) in enumerate(train_loader):
        # random start inside the epsilon ball
        for j in range(len(epsilon)):
            delta[:, j, :, :].uniform_(-epsilon[j][0][0].item(), epsilon[j][0][0].item())
        delta.data = clamp(delta, lower_limit - X, upper_limit - X)
        delta.requires_grad = True
        output = model(X + delta[:X.size(0)])
        loss = F.cross_entropy(output, y)
        loss.backward()
        grad = delta.grad.detach()
        delta.data = clamp(delta + alpha * torch.sign(grad), -epsilon, epsilon)
        delta.data[:X.size(0)] = clamp(delta[:X.size(0)], lower_limit - X, upper_limit - X)
        delta = delta.detach()
        output = model(X + delta[:X.size(0)])
        loss = criterion(output, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return delta


if __name__ == "__main__":
    torch.manual_seed(0)
    model = PreActNet()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    epsilon = (8 / 255.) / std
    alpha = (10 / 255.) / std
    X = (torch.rand(4, 3, 8, 8) - mu) / std
    y = torch.randint(0, 10, (4,))
    before = [p.detach().clone() for p in model.parameters()]
    delta = train_epoch(model, opt, nn.CrossEntropyLoss(), [(X, y)], epsilon, alpha, 4)
    assert (delta.abs() <= epsilon + 1e-6).all()
    assert ((X + delta) <= upper_limit + 1e-6).all() and ((X + delta) >= lower_limit - 1e-6).all()
    assert delta.abs().sum() > 0 and not delta.requires_grad
    assert all(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
    print("evidence holds: delta stays in the epsilon ball and the image range; the model trains on the adversarial batch")
