# source: https://github.com/yifita/deep_cage/issues/16
# category: DL201
# expect: flag 19
# evidence: the network's gradients are identical for mvc_weight 0 and 10: the WREG regulariser on the cage weights reaches no parameter
import torch
import torch.nn as nn
import torch.nn.functional as F


def mean_value_coordinates(query, cage, eps=1e-6):
    # soft inverse-distance weights of every query point to every cage vertex (B, N, K)
    dist = torch.cdist(query, cage)
    weights = 1.0 / (dist + eps)
    return weights / weights.sum(dim=-1, keepdim=True)


def deform_with_MVC(cage, cage_deformed, query):
    weights = mean_value_coordinates(query, cage)
    weights = weights.detach()
    deformed = torch.bmm(weights, cage_deformed)
    return deformed, weights


class NetworkFull(nn.Module):
    def __init__(self, n_cage=6, dim=3, bottleneck=16):
        super().__init__()
        self.template = nn.Parameter(torch.randn(1, n_cage, dim), requires_grad=False)
        self.encoder = nn.Sequential(nn.Linear(dim, bottleneck), nn.ReLU())
        self.nc_decoder = nn.Linear(bottleneck, n_cage * dim)
        self.nd_decoder = nn.Linear(2 * bottleneck, n_cage * dim)

    def forward(self, source_shape, target_shape):
        B, _, D = source_shape.shape
        source_code = self.encoder(source_shape).max(dim=1)[0]
        target_code = self.encoder(target_shape).max(dim=1)[0]
        cage = self.template + self.nc_decoder(source_code).view(B, -1, D)
        offset = self.nd_decoder(torch.cat([source_code, target_code], dim=1)).view(B, -1, D)
        new_cage = cage + offset
        deformed, weights = deform_with_MVC(cage, new_cage, source_shape)
        return {"cage": cage, "new_cage": new_cage, "deformed": deformed, "weight": weights}


class AllLosses:
    def __init__(self, mvc_weight):
        self.mvc_weight = mvc_weight

    def mvc_reg_loss(self, weights):
        return F.relu(-weights).sum() + weights.pow(2).sum(dim=-1).mean()

    def __call__(self, all_outputs, target_shape):
        loss = {}
        loss["CD"] = torch.cdist(all_outputs["deformed"], target_shape).min(dim=2)[0].mean()
        loss["WREG"] = self.mvc_reg_loss(all_outputs["weight"]) * self.mvc_weight
        return loss


def train_step(net, criterion, optimizer, source_shape, target_shape):
    all_outputs = net(source_shape, target_shape)
    loss = criterion(all_outputs, target_shape)
    total = sum(loss.values())
    optimizer.zero_grad()
    total.backward()
    optimizer.step()
    return {k: v.item() for k, v in loss.items()}


def grads_for(net, mvc_weight, source_shape, target_shape):
    loss = AllLosses(mvc_weight)(net(source_shape, target_shape), target_shape)
    params = [p for p in net.parameters() if p.requires_grad]
    return torch.autograd.grad(sum(loss.values()), params)


if __name__ == "__main__":
    torch.manual_seed(0)
    net = NetworkFull()
    source_shape, target_shape = torch.randn(2, 20, 3), torch.randn(2, 20, 3)
    g0 = grads_for(net, 0.0, source_shape, target_shape)
    g10 = grads_for(net, 10.0, source_shape, target_shape)
    assert all(torch.equal(a, b) for a, b in zip(g0, g10))
    optimizer = torch.optim.Adam([p for p in net.parameters() if p.requires_grad], lr=1e-3)
    losses = train_step(net, AllLosses(10.0), optimizer, source_shape, target_shape)
    assert losses["WREG"] > 0
    print("evidence holds: mvc_weight 0 or 10 gives the same gradients, so the WREG term never trains the cage")
