# source: https://github.com/pranoyr/cnn-lstm/issues/6
# category: DL201
# expect: flag 44, 45
# evidence: the freshly created resnet.fc projection to 300 features is handed to Adam with all other parameters, but its grad stays None and its weights never change, because the whole resnet runs under torch.no_grad().
import argparse
import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicResNet(nn.Module):
    """tiny stand-in for torchvision resnet101 (conv trunk + avgpool + fc)"""
    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.layer1 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, num_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.layer1(x))
        x = torch.flatten(self.avgpool(x), 1)
        return self.fc(x)


def resnet101(pretrained=True):
    return BasicResNet()


class CNNLSTM(nn.Module):
    def __init__(self, num_classes=2):
        super(CNNLSTM, self).__init__()
        self.resnet = resnet101(pretrained=True)
        self.resnet.fc = nn.Sequential(nn.Linear(self.resnet.fc.in_features, 300))
        self.lstm = nn.LSTM(input_size=300, hidden_size=256, num_layers=3)
        self.fc1 = nn.Linear(256, 128)
        self.fc2 = nn.Linear(128, num_classes)

    def forward(self, x_3d):
        hidden = None
        for t in range(x_3d.size(1)):
            with torch.no_grad():
                x = self.resnet(x_3d[:, t, :, :, :])
            out, hidden = self.lstm(x.unsqueeze(0), hidden)

        x = self.fc1(out[-1, :, :])
        x = F.relu(x)
        x = self.fc2(x)
        return x


class AverageMeter(object):
    def __init__(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def calculate_accuracy(outputs, targets):
    batch_size = targets.size(0)
    _, pred = outputs.topk(1, 1, largest=True, sorted=True)
    pred = pred.t()
    correct = pred.eq(targets.view(1, -1))
    return correct.float().sum().item() / batch_size


def train_epoch(model, data_loader, criterion, optimizer, epoch, log_interval, device):
    model.train()
    losses = AverageMeter()
    accuracies = AverageMeter()
    for batch_idx, (data, targets) in enumerate(data_loader):
        data, targets = data.to(device), targets.to(device)
        outputs = model(data)
        loss = criterion(outputs, targets)
        acc = calculate_accuracy(outputs, targets)
        losses.update(loss.item(), data.size(0))
        accuracies.update(acc, data.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if (batch_idx + 1) % log_interval == 0:
            print('Train Epoch: {} [{}]\tLoss: {:.4f}\tAcc: {:.2f}'.format(epoch, batch_idx + 1, losses.avg, accuracies.avg * 100))
    return losses.avg, accuracies.avg


def main(opt):
    device = torch.device("cpu")
    model = CNNLSTM(num_classes=opt.n_classes)
    criterion = nn.CrossEntropyLoss()
    crnn_params = list(model.parameters())
    optimizer = torch.optim.Adam(crnn_params, lr=opt.lr_rate, weight_decay=opt.weight_decay)
    # random clips instead of the UCF101 loader: (batch, frames, C, H, W)
    train_loader = [(torch.randn(2, opt.sample_duration, 3, 16, 16), torch.randint(0, opt.n_classes, (2,)))
                    for _ in range(3)]
    for epoch in range(1, opt.n_epochs + 1):
        train_epoch(model, train_loader, criterion, optimizer, epoch, opt.log_interval, device)
    return model, optimizer


if __name__ == "__main__":
    torch.manual_seed(0)
    parser = argparse.ArgumentParser()
    parser.add_argument('--n_classes', type=int, default=2)
    parser.add_argument('--lr_rate', type=float, default=1e-3)
    parser.add_argument('--weight_decay', type=float, default=0.0)
    parser.add_argument('--sample_duration', type=int, default=3)
    parser.add_argument('--n_epochs', type=int, default=2)
    parser.add_argument('--log_interval', type=int, default=3)
    opt = parser.parse_args([])
    torch.manual_seed(0)
    init = CNNLSTM(num_classes=opt.n_classes)
    torch.manual_seed(0)
    model, optimizer = main(opt)
    fc_weight = model.resnet.fc[0].weight
    assert any(p is fc_weight for g in optimizer.param_groups for p in g["params"])
    assert fc_weight.requires_grad and fc_weight.grad is None
    with torch.no_grad():
        assert torch.equal(fc_weight, init.resnet.fc[0].weight)
        assert not torch.equal(model.fc1.weight, init.fc1.weight)
    print("evidence holds: resnet.fc is optimized by Adam but has grad None and keeps its random init; fc1 trains")
