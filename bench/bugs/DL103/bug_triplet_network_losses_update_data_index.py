# source: https://github.com/andreasveit/triplet-network-pytorch/issues/8
# category: DL103
# expect: flag 66, 68
# evidence: the first batch of train() raises "IndexError: invalid index of a 0-dim tensor" at losses.update(loss_triplet.data[0], ...)
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 4, kernel_size=3)
        self.fc1 = nn.Linear(4 * 3 * 3, 8)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        return self.fc1(x.view(x.size(0), -1))


class Tripletnet(nn.Module):
    def __init__(self, embeddingnet):
        super(Tripletnet, self).__init__()
        self.embeddingnet = embeddingnet

    def forward(self, x, y, z):
        embedded_x = self.embeddingnet(x)
        embedded_y = self.embeddingnet(y)
        embedded_z = self.embeddingnet(z)
        dist_a = F.pairwise_distance(embedded_x, embedded_y, 2)
        dist_b = F.pairwise_distance(embedded_x, embedded_z, 2)
        return dist_a, dist_b, embedded_x, embedded_y, embedded_z


class AverageMeter(object):
    def __init__(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def accuracy(dista, distb, margin=0):
    pred = (dista - distb - margin).cpu()
    return (pred > 0).sum().item() * 1.0 / dista.size()[0]


def train(train_loader, tnet, criterion, optimizer, epoch):
    losses = AverageMeter()
    accs = AverageMeter()
    emb_norms = AverageMeter()
    tnet.train()
    for batch_idx, (data1, data2, data3) in enumerate(train_loader):
        dista, distb, embedded_x, embedded_y, embedded_z = tnet(data1, data2, data3)
        # 1 means, dista should be larger than distb
        target = torch.FloatTensor(dista.size()).fill_(1)
        loss_triplet = criterion(dista, distb, target)
        loss_embedd = embedded_x.norm(2) + embedded_y.norm(2) + embedded_z.norm(2)
        loss = loss_triplet + 0.001 * loss_embedd

        acc = accuracy(dista, distb)
        losses.update(loss_triplet.data[0], data1.size(0))
        accs.update(acc, data1.size(0))
        emb_norms.update(loss_embedd.data[0] / 3, data1.size(0))

        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return losses.avg, accs.avg


if __name__ == "__main__":
    torch.manual_seed(0)
    tnet = Tripletnet(Net())
    criterion = torch.nn.MarginRankingLoss(margin=0.2)
    optimizer = optim.SGD(tnet.parameters(), lr=0.01, momentum=0.5)
    loader = [tuple(torch.randn(4, 1, 8, 8) for _ in range(3))]
    try:
        train(loader, tnet, criterion, optimizer, 1)
    except IndexError as err:
        assert "invalid index of a 0-dim tensor" in str(err), str(err)
    else:
        raise AssertionError("loss_triplet.data[0] should fail on a 0-dim loss")
    print("evidence holds: losses.update(loss_triplet.data[0], ...) raised IndexError on the 0-dim loss")
