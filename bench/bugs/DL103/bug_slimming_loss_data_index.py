# source: https://github.com/foolwood/pytorch-slimming/issues/12
# category: DL103
# expect: flag 60, 62, 72
# evidence: train() dies at its first log line: loss.data[0] raises "IndexError: invalid index of a 0-dim tensor"; test() would hit the same on .data[0]
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

parser = argparse.ArgumentParser(description='PyTorch Slimming CIFAR training')
parser.add_argument('--sr', action='store_true', default=True)
parser.add_argument('--s', type=float, default=0.0001)
parser.add_argument('--log-interval', type=int, default=1)
args = parser.parse_args([])


class vgg(nn.Module):
    def __init__(self, cfg=(8, 'M', 16), num_classes=10):
        super(vgg, self).__init__()
        layers, in_channels = [], 3
        for v in cfg:
            if v == 'M':
                layers += [nn.MaxPool2d(2, 2)]
            else:
                layers += [nn.Conv2d(in_channels, v, 3, padding=1, bias=False), nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
                in_channels = v
        self.feature = nn.Sequential(*layers)
        self.classifier = nn.Linear(in_channels, num_classes)

    def forward(self, x):
        x = self.feature(x)
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.classifier(x)


model = vgg()
optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)


# additional subgradient descent on the sparsity-induced penalty term
def updateBN():
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.weight.grad.add_(args.s * torch.sign(m.weight.detach()))  # L1


def train(epoch, train_loader):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        if args.sr:
            updateBN()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print('Train Epoch: {} [{}/{} ({:.1f}%)]\tLoss: {:.6f}'.format(
                epoch, batch_idx * len(data), len(train_loader.dataset),
                100. * batch_idx / len(train_loader), loss.data[0]))


def test(test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data)
            test_loss += F.cross_entropy(output, target, reduction='sum').data[0]
            pred = output.argmax(1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    return correct / float(len(test_loader.dataset))


class Loader(list):
    def __init__(self, batches):
        super(Loader, self).__init__(batches)
        self.dataset = [None] * sum(len(b[0]) for b in batches)


if __name__ == "__main__":
    torch.manual_seed(0)
    loader = Loader([(torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,)))])
    try:
        train(1, loader)
    except IndexError as err:
        assert "invalid index of a 0-dim tensor" in str(err), str(err)
    else:
        raise AssertionError("loss.data[0] should fail on a 0-dim loss")
    try:
        test(loader)
    except IndexError as err:
        assert "invalid index of a 0-dim tensor" in str(err), str(err)
    else:
        raise AssertionError("the summed test loss is 0-dim too")
    print("evidence holds: loss.data[0] and cross_entropy(...).data[0] raise IndexError on 0-dim tensors")
