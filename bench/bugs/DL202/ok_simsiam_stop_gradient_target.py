# source: https://github.com/facebookresearch/simsiam/blob/main/simsiam/builder.py
# category: DL202
# expect: clean
# evidence: the loss compares predictions p with detached targets z; encoder and predictor both get nonzero gradients
import torch
import torch.nn as nn


class SimSiam(nn.Module):
    """SimSiam: a shared encoder, a predictor, and a stop-gradient on the targets."""

    def __init__(self, in_dim=12, dim=16, pred_dim=8):
        super(SimSiam, self).__init__()
        self.encoder = nn.Sequential(nn.Linear(in_dim, dim, bias=False), nn.BatchNorm1d(dim), nn.ReLU(inplace=True),
                                     nn.Linear(dim, dim, bias=False), nn.BatchNorm1d(dim, affine=False))
        self.predictor = nn.Sequential(nn.Linear(dim, pred_dim, bias=False), nn.BatchNorm1d(pred_dim),
                                       nn.ReLU(inplace=True), nn.Linear(pred_dim, dim))

    def forward(self, x1, x2):
        z1 = self.encoder(x1)
        z2 = self.encoder(x2)
        p1 = self.predictor(z1)
        p2 = self.predictor(z2)
        return p1, p2, z1.detach(), z2.detach()


def train(train_loader, model, criterion, optimizer, epoch):
    model.train()
    losses = []
    for i, (images, _) in enumerate(train_loader):
        p1, p2, z1, z2 = model(x1=images[0], x2=images[1])
        loss = -(criterion(p1, z2).mean() + criterion(p2, z1).mean()) * 0.5
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return losses


if __name__ == "__main__":
    torch.manual_seed(0)
    model = SimSiam()
    criterion = nn.CosineSimilarity(dim=1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    base = torch.randn(8, 12)
    loader = [((base + 0.1 * torch.randn(8, 12), base + 0.1 * torch.randn(8, 12)), None) for _ in range(2)]
    train(loader, model, criterion, optimizer, epoch=0)
    assert model.encoder[0].weight.grad.abs().sum() > 0
    assert model.predictor[3].weight.grad.abs().sum() > 0
    print("evidence holds: only the targets are detached; encoder and predictor both receive gradients")
