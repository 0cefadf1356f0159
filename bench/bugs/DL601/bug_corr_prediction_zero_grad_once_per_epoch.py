# source: https://github.com/salesforce/corr_based_prediction/issues/1
# category: DL601
# expect: flag 61, 63, 74, 81
# evidence: optimizer.zero_grad() runs once before the batch loop, so the k-th Adam step of an epoch uses the sum of k batch gradients
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class CNN(nn.Module):
    def __init__(self, num_classes=4, inp_channels=3):
        super().__init__()
        self.conv1 = nn.Conv2d(inp_channels, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x, ret_hid=False, train=True):
        h = F.relu(self.conv1(x))
        h = F.relu(self.conv2(h))
        hid = F.adaptive_avg_pool2d(h, 1).flatten(1)
        out = self.fc(hid)
        if ret_hid:
            return out, hid
        return out


def entropy_reg(hid_repr, targets):
    """Penalty on the hidden representation: spread of each class around its mean."""
    reg = 0.
    for c in set(targets.tolist()):
        h_c = hid_repr[targets == c]
        if h_c.size(0) > 1:
            reg = reg + ((h_c - h_c.mean(0, keepdim=True)) ** 2).mean()
    return reg


parser = argparse.ArgumentParser(description='Entropy Penalty using Information Bottleneck Principle')
parser.add_argument('--beta', type=float, default=0.1)
parser.add_argument('--lr', type=float, default=0.001)
parser.add_argument('--wdecay', type=float, default=0.0001)
parser.add_argument('--epochs', type=int, default=2)
args = parser.parse_args([])

torch.manual_seed(0)
trainloader = [(torch.randn(8, 3, 8, 8), torch.randint(0, 4, (8,))) for _ in range(4)]
model = CNN(num_classes=4)
params = list(model.parameters())
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(params, lr=args.lr, weight_decay=args.wdecay)


def train(epoch):
    global trainloader, optimizer, args, model
    model.train()
    correct = 0
    total = 0
    total_loss, tot_regularization_loss = 0, 0

    optimizer.zero_grad()
    tot_iters = len(trainloader)
    for batch_idx in range(tot_iters):
        inputs, targets = trainloader[batch_idx]

        outputs, hid_repr = model(inputs, ret_hid=True)

        loss = criterion(outputs, targets)

        regularization_loss = entropy_reg(hid_repr, targets)
        tot_regularization_loss = tot_regularization_loss + regularization_loss.item()

        total_loss_ = loss + args.beta * regularization_loss
        total_loss_.backward()

        total_loss += loss.item()
        _, predicted = torch.max(F.softmax(outputs, dim=1), 1)
        total += targets.size(0)
        correct += predicted.eq(targets).sum().item()

        optimizer.step()

    acc = 100. * correct / total
    return total_loss / (batch_idx + 1), acc, tot_regularization_loss / (batch_idx + 1)


if __name__ == "__main__":
    w = model.fc.weight
    fresh, seen = [], []
    w.register_hook(lambda g: fresh.append(g.detach().clone()))
    optimizer.register_step_pre_hook(lambda opt, a, kw: seen.append(w.grad.detach().clone()))

    for epoch in range(1, args.epochs + 1):
        train(epoch)

    n = len(trainloader)
    assert len(fresh) == len(seen) == n * args.epochs
    for e in range(args.epochs):
        for k in range(n):
            i = e * n + k
            assert torch.allclose(seen[i], torch.stack(fresh[e * n: i + 1]).sum(0), atol=1e-6)
    assert not torch.allclose(seen[n - 1], fresh[n - 1], atol=1e-6)
    print("evidence holds: within an epoch each step applies the running sum of the batch gradients")
