# source: https://github.com/YirongMao/softmax_variants/issues/5
# category: DL103
# expect: flag 53
# evidence: the progress print reads loss.data[0] on the 0-dim loss and training dies with IndexError "invalid index of a 0-dim tensor".
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable

batch_size = 8


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1_1 = nn.Conv2d(1, 4, kernel_size=3, padding=1)
        self.prelu1_1 = nn.PReLU()
        self.conv2_1 = nn.Conv2d(4, 8, kernel_size=3, padding=1)
        self.prelu2_1 = nn.PReLU()
        self.preluip1 = nn.PReLU()
        self.ip1 = nn.Linear(8 * 3 * 3, 2)
        self.ip2 = nn.Linear(2, 10, bias=False)

    def forward(self, x):
        x = self.prelu1_1(self.conv1_1(x))
        x = F.max_pool2d(x, 2)
        x = self.prelu2_1(self.conv2_1(x))
        x = F.max_pool2d(x, 2)
        x = x.view(-1, 8 * 3 * 3)
        ip1 = self.preluip1(self.ip1(x))
        ip2 = self.ip2(ip1)
        return ip1, F.log_softmax(ip2, dim=1)


def train(train_loader, model, criterion, optimizer, epoch, use_cuda=False):
    for i, (data, target) in enumerate(train_loader):
        if use_cuda:
            data = data.cuda()
            target = target.cuda()
        data, target = Variable(data), Variable(target)

        feats, logits = model(data)
        loss = criterion[0](logits, target)

        _, predicted = torch.max(logits.data, 1)
        accuracy = (target.data == predicted).float().mean()

        optimizer[0].zero_grad()
        loss.backward()
        optimizer[0].step()

        if (i + 1) % 2 == 0:
            print('Epoch [%d], Iter [%d/%d] Loss: %.4f Acc %.4f' % (epoch, i + 1, len(train_loader), loss.data[0], accuracy))


if __name__ == "__main__":
    torch.manual_seed(0)
    train_loader = [(torch.randn(batch_size, 1, 12, 12), torch.randint(0, 10, (batch_size,))) for _ in range(4)]
    model = Net()
    nllloss = nn.NLLLoss()
    criterion = [nllloss]
    optimizer4nn = torch.optim.SGD(model.parameters(), lr=0.001, momentum=0.9, weight_decay=0.0005)
    optimizer = [optimizer4nn]

    try:
        for epoch in range(2):
            train(train_loader, model, criterion, optimizer, epoch + 1)
    except IndexError as e:
        message = str(e)
        print("IndexError:", message)
        assert "invalid index of a 0-dim tensor" in message
    else:
        raise AssertionError("expected IndexError from loss.data[0]")
    print("evidence holds: loss.data[0] on a 0-dim loss raises IndexError and stops training")
