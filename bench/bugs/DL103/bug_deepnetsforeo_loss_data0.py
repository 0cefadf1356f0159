# source: https://github.com/nshaud/DeepNetsForEO/issues/36
# category: DL103
# expect: flag 58
# evidence: loss is a 0-dim tensor, so the bookkeeping read loss.data[0] in train() raises IndexError "invalid index of a 0-dim tensor" right after the first optimizer step.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable

torch.manual_seed(0)
N_CLASSES = 3
WEIGHTS = torch.ones(N_CLASSES)


class SegNet(nn.Module):
    def __init__(self, in_channels=3, out_channels=N_CLASSES):
        super(SegNet, self).__init__()
        self.conv1_1 = nn.Conv2d(in_channels, 8, 3, padding=1)
        self.conv1_1_bn = nn.BatchNorm2d(8)
        self.conv_out = nn.Conv2d(8, out_channels, 3, padding=1)

    def forward(self, x):
        x = F.relu(self.conv1_1_bn(self.conv1_1(x)))
        return F.log_softmax(self.conv_out(x), dim=1)


def CrossEntropy2d(input, target, weight=None, size_average=True):
    dim = input.dim()
    if dim == 4:
        output = input.view(input.size(0), input.size(1), -1)
        output = torch.transpose(output, 1, 2).contiguous()
        output = output.view(-1, output.size(2))
        target = target.view(-1)
        return F.cross_entropy(output, target, weight, reduction='mean' if size_average else 'sum')
    raise ValueError('Expected 4 dimensions (got {})'.format(dim))


train_loader = [(torch.randn(2, 3, 8, 8), torch.randint(0, N_CLASSES, (2, 8, 8))) for _ in range(3)]


def train(net, optimizer, epochs, scheduler=None, weights=WEIGHTS, save_epoch=5):
    losses = np.zeros(1000)
    mean_losses = np.zeros(1000)
    iter_ = 0
    for e in range(1, epochs + 1):
        if scheduler is not None:
            scheduler.step()
        net.train()
        for batch_idx, (data, target) in enumerate(train_loader):
            data, target = Variable(data), Variable(target)
            optimizer.zero_grad()
            output = net(data)
            loss = CrossEntropy2d(output, target, weight=weights)
            loss.backward()
            optimizer.step()

            losses[iter_] = loss.data[0]
            mean_losses[iter_] = np.mean(losses[max(0, iter_ - 100):iter_])
            iter_ += 1
    return mean_losses[:iter_]


if __name__ == "__main__":
    net = SegNet()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=0.0005)
    message = ""
    try:
        train(net, optimizer, 2)
    except IndexError as e:
        message = str(e)
    assert "invalid index of a 0-dim tensor" in message, message
    print("evidence holds: loss.data[0] raised IndexError: %s" % message.split(".")[0])
