# source: https://github.com/queenie88/A-GCN/issues/4
# category: DL201
# expect: flag 47
# evidence: after a training step W_theta and W_phi (which build the adjacency) have grad None and keep their initial values, while the GCN weights train
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_features, out_features))
        stdv = 1.0 / math.sqrt(out_features)
        nn.init.uniform_(self.weight, -stdv, stdv)

    def forward(self, input, adj):
        support = torch.matmul(input, self.weight)
        return torch.matmul(adj, support)


class AGCNResnet(nn.Module):
    def __init__(self, num_classes, in_channel=16, feat_dim=32, emb_dim=8):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, feat_dim, 3, padding=1), nn.ReLU())
        self.pooling = nn.AdaptiveMaxPool2d(1)
        self.W_theta = nn.Linear(in_channel, emb_dim, bias=False)
        self.W_phi = nn.Linear(in_channel, emb_dim, bias=False)
        self.gc1 = GraphConvolution(in_channel, 16)
        self.gc2 = GraphConvolution(16, feat_dim)
        self.relu = nn.LeakyReLU(0.2)

    def build_adjacency(self, inp):
        theta = self.W_theta(inp)
        phi = self.W_phi(inp)
        adj = torch.softmax(torch.matmul(theta, phi.t()), dim=1)
        return adj

    def forward(self, feature, inp):
        feature = self.features(feature)
        feature = self.pooling(feature).view(feature.size(0), -1)

        inp = inp[0]
        adj = self.build_adjacency(inp)
        adj = adj.detach()
        x = self.gc1(inp, adj)
        x = self.relu(x)
        x = self.gc2(x, adj)

        x = x.transpose(0, 1)
        return torch.matmul(feature, x)

    def get_config_optim(self, lr, lrp):
        return [
            {"params": self.features.parameters(), "lr": lr * lrp},
            {"params": self.W_theta.parameters(), "lr": lr},
            {"params": self.W_phi.parameters(), "lr": lr},
            {"params": self.gc1.parameters(), "lr": lr},
            {"params": self.gc2.parameters(), "lr": lr},
        ]


def train_one_epoch(model, criterion, optimizer, loader, inp):
    model.train()
    for images, target in loader:
        output = model(images, inp)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    num_classes = 5
    model = AGCNResnet(num_classes)
    criterion = nn.MultiLabelSoftMarginLoss()
    optimizer = torch.optim.SGD(model.get_config_optim(0.1, 0.1), lr=0.1, momentum=0.9)
    inp = torch.randn(1, num_classes, 16)
    loader = [(torch.randn(4, 3, 6, 6), torch.randint(0, 2, (4, num_classes)).float()) for _ in range(2)]
    theta_before = model.W_theta.weight.detach().clone()
    gc_before = model.gc1.weight.detach().clone()
    train_one_epoch(model, criterion, optimizer, loader, inp)
    assert model.W_theta.weight.grad is None and model.W_phi.weight.grad is None
    assert torch.equal(theta_before, model.W_theta.weight)
    assert not torch.equal(gc_before, model.gc1.weight)
    print("evidence holds: the adjacency projections W_theta/W_phi never get a gradient; the GCN layers do")
