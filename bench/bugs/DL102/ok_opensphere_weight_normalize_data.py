# source: https://github.com/ydwen/opensphere/issues/7
# category: DL102
# expect: clean
# evidence: SphereFace.forward reassigns self.w.data to its column-normalised copy (same shape and dtype) under no_grad; the loss still gives self.w a gradient every iteration, SGD-with-momentum keeps stepping it, and its columns stay unit-norm at each forward.
"""model/head/sphereface.py (SphereFace head) with a tiny backbone and the train loop of train.py, shrunk."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class SphereFace(nn.Module):
    """ reference: <SphereFace: Deep Hypersphere Embedding for Face Recognition>"
        It also used characteristic gradient detachment tricks proposed in
        <SphereFace Revived: Unifying Hyperspherical Face Recognition>.
    """
    def __init__(self, feat_dim, num_class, s=30., m=1.5):
        super(SphereFace, self).__init__()
        self.feat_dim = feat_dim
        self.num_class = num_class
        self.s = s
        self.m = m
        self.w = nn.Parameter(torch.Tensor(feat_dim, num_class))
        nn.init.xavier_normal_(self.w)

    def forward(self, x, y):
        # weight normalization
        with torch.no_grad():
            self.w.data = F.normalize(self.w.data, dim=0)

        # cos_theta and d_theta
        cos_theta = F.normalize(x, dim=1).mm(self.w)
        with torch.no_grad():
            m_theta = torch.acos(cos_theta.clamp(-1. + 1e-5, 1. - 1e-5))
            m_theta.scatter_(1, y.view(-1, 1), self.m, reduce='multiply')
            k = (m_theta / math.pi).floor()
            sign = -2 * torch.remainder(k, 2) + 1  # (-1)**k
            phi_theta = sign * torch.cos(m_theta) - 2. * k
            d_theta = phi_theta - cos_theta

        logits = self.s * (cos_theta + d_theta)
        loss = F.cross_entropy(logits, y)
        return loss


class Backbone(nn.Module):
    def __init__(self, in_dim=20, feat_dim=8):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_dim, 32), nn.PReLU(), nn.Linear(32, feat_dim))

    def forward(self, x):
        return self.body(x)


def train_one_epoch(model, optimizer, loader, col_norms):
    model['backbone'].train()
    model['head'].train()
    for images, labels in loader:
        feats = model['backbone'](images)
        loss = model['head'](feats, labels)
        with torch.no_grad():
            col_norms.append(model['head'].w.norm(dim=0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = {'backbone': Backbone(), 'head': SphereFace(feat_dim=8, num_class=5)}
    params = list(model['backbone'].parameters()) + list(model['head'].parameters())
    optimizer = torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=5e-4)
    loader = [(torch.randn(16, 20), torch.randint(0, 5, (16,))) for _ in range(4)]
    w_param = model['head'].w
    w_before = w_param.detach().clone()

    col_norms = []
    for epoch in range(2):
        train_one_epoch(model, optimizer, loader, col_norms)

    assert model['head'].w is w_param and w_param.grad is not None and w_param.grad.abs().sum().item() > 0
    assert optimizer.state[w_param]['momentum_buffer'].shape == w_param.shape
    with torch.no_grad():
        assert not torch.allclose(F.normalize(w_before, dim=0), F.normalize(w_param, dim=0))
    assert all(torch.allclose(n, torch.ones_like(n), atol=1e-5) for n in col_norms)
    print("evidence holds: the head weight keeps training while .data keeps it column-normalised")
