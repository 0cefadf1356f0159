# source: https://github.com/PatrickHua/SimSiam/blob/main/models/simsiam.py
# category: DL202
# expect: clean
# evidence: the loss detaches only the target branch z (stop-gradient); backward still gives non-zero gradients to every encoder and predictor parameter, and an SGD step changes them.
import torch
import torch.nn as nn
import torch.nn.functional as F


def D(p, z):  # negative cosine similarity
    z = z.detach()  # stop gradient
    p = F.normalize(p, dim=1)  # l2-normalize
    z = F.normalize(z, dim=1)  # l2-normalize
    return -(p * z).sum(dim=1).mean()


# same thing, much faster.
def neg_cos_D(p, z):
    return - torch.nn.functional.cosine_similarity(p, z.detach(), dim=-1).mean()


class projection_MLP(nn.Module):
    def __init__(self, in_dim, hidden_dim=16, out_dim=16):
        super().__init__()
        self.layer1 = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.BatchNorm1d(hidden_dim), nn.ReLU(inplace=True))
        self.layer2 = nn.Sequential(nn.Linear(hidden_dim, hidden_dim), nn.BatchNorm1d(hidden_dim), nn.ReLU(inplace=True))
        self.layer3 = nn.Sequential(nn.Linear(hidden_dim, out_dim), nn.BatchNorm1d(hidden_dim))

    def forward(self, x):
        x = self.layer1(x.squeeze())
        x = self.layer2(x)
        x = self.layer3(x)
        return x


class prediction_MLP(nn.Module):
    def __init__(self, in_dim=16, hidden_dim=8, out_dim=16):
        super().__init__()
        self.layer1 = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.BatchNorm1d(hidden_dim), nn.ReLU(inplace=True))
        self.layer2 = nn.Linear(hidden_dim, out_dim)

    def forward(self, x):
        x = self.layer1(x)
        x = self.layer2(x)
        return x


class TinyBackbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 10)


class SimSiam(nn.Module):
    def __init__(self, backbone=None):
        super().__init__()
        backbone = backbone if backbone is not None else TinyBackbone()
        self.encoder = nn.Sequential(  # f encoder
            *list(backbone.children())[:-1],
            projection_MLP(list(backbone.children())[-1].in_features)
        )
        self.predictor = prediction_MLP()

    def forward(self, x1, x2):
        f, h = self.encoder, self.predictor
        z1, z2 = f(x1), f(x2)
        p1, p2 = h(z1), h(z2)
        L = D(p1, z2) / 2 + D(p2, z1) / 2
        return {'loss': L}


if __name__ == "__main__":
    torch.manual_seed(0)
    model = SimSiam()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    x1 = torch.randn(6, 3, 8, 8)
    x2 = x1 + 0.1 * torch.randn_like(x1)
    for step in range(2):
        model.zero_grad()
        loss = model.forward(x1, x2)['loss'].mean()
        loss.backward()
        if step == 0:
            for n, p in model.named_parameters():
                assert p.grad is not None, n
            assert model.encoder[0].weight.grad.abs().sum().item() > 0
            assert model.predictor.layer2.weight.grad.abs().sum().item() > 0
        optimizer.step()
    changed = [n for n, p in model.named_parameters() if not torch.equal(p.detach(), before[n])]
    assert "0.weight" in [n.split("encoder.")[-1] for n in changed if n.startswith("encoder.")]
    assert any(n.startswith("predictor.") for n in changed)
    with torch.no_grad():
        p, z = torch.randn(4, 16), torch.randn(4, 16)
        assert torch.allclose(D(p, z), neg_cos_D(p, z), atol=1e-6)
    print("evidence holds: stop-gradient on z only; encoder and predictor receive gradients and are updated")
