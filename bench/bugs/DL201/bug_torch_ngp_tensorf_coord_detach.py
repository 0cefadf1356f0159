# source: https://github.com/ashawkey/torch-ngp/issues/60
# category: DL201
# expect: flag 38, 40
# evidence: the point-offset network added in front of TensoRF only reaches the loss through mat_coord / vec_coord, which get_sigma_feat detaches, so its parameters keep grad None and never change while the plane/line factors train
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class NeRFNetwork(nn.Module):
    """TensoR VM decomposition (density branch only, tiny resolution)."""

    def __init__(self, resolution=[16, 16, 16], sigma_rank=[4], bound=1):
        super().__init__()
        self.resolution = resolution
        self.bound = bound
        self.sigma_rank = sigma_rank
        self.mat_ids = [[0, 1], [0, 2], [1, 2]]
        self.vec_ids = [2, 1, 0]
        self.sigma_mat, self.sigma_vec = self.init_one_svd(self.sigma_rank[0], self.resolution)

    def init_one_svd(self, n_component, resolution, scale=0.1):
        mat, vec = [], []
        for i in range(len(self.vec_ids)):
            vec_id = self.vec_ids[i]
            mat_id_0, mat_id_1 = self.mat_ids[i]
            mat.append(nn.Parameter(scale * torch.randn((1, n_component, resolution[mat_id_1], resolution[mat_id_0]))))
            vec.append(nn.Parameter(scale * torch.randn((1, n_component, resolution[vec_id], 1))))
        return nn.ParameterList(mat), nn.ParameterList(vec)

    def get_sigma_feat(self, x):
        # x: [N, 3], in [-1, 1] (outliers will be treated as zero due to grid_sample padding mode)
        N = x.shape[0]

        # plane + line basis
        mat_coord = torch.stack((x[..., self.mat_ids[0]], x[..., self.mat_ids[1]], x[..., self.mat_ids[2]])).detach().view(3, -1, 1, 2)  # [3, N, 1, 2]
        vec_coord = torch.stack((x[..., self.vec_ids[0]], x[..., self.vec_ids[1]], x[..., self.vec_ids[2]]))
        vec_coord = torch.stack((torch.zeros_like(vec_coord), vec_coord), dim=-1).detach().view(3, -1, 1, 2)  # [3, N, 1, 2], fake 2d coord

        sigma_feat = torch.zeros([N, ], device=x.device)

        for i in range(len(self.sigma_mat)):
            mat_feat = F.grid_sample(self.sigma_mat[i], mat_coord[[i]], align_corners=True).view(-1, N)  # [1, R, N, 1] --> [R, N]
            vec_feat = F.grid_sample(self.sigma_vec[i], vec_coord[[i]], align_corners=True).view(-1, N)  # [R, N]
            sigma_feat = sigma_feat + torch.sum(mat_feat * vec_feat, dim=0)

        return sigma_feat

    def density(self, x):
        # x: [N, 3], in [-bound, bound]
        x = 2 * (x + self.bound) / (2 * self.bound) - 1  # [-1, 1]
        sigma_feat = self.get_sigma_feat(x)
        sigma = F.softplus(sigma_feat)
        return {'sigma': sigma}


class PointOffsetNet(nn.Module):
    """The network the user put in front of the fields to optimise the sample positions."""

    def __init__(self, hidden=16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, hidden), nn.ReLU(), nn.Linear(hidden, 3), nn.Tanh())

    def forward(self, xyzs):
        return xyzs + 0.1 * self.net(xyzs)


def train_step(model, offset_net, optimizer, xyzs, gt_sigma):
    xyzs = offset_net(xyzs)
    sigma = model.density(xyzs)['sigma']
    loss = F.mse_loss(sigma, gt_sigma)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


if __name__ == "__main__":
    model = NeRFNetwork()
    offset_net = PointOffsetNet()
    optimizer = torch.optim.Adam(list(model.parameters()) + list(offset_net.parameters()), lr=1e-2)
    offset_before = [p.detach().clone() for p in offset_net.parameters()]
    plane_before = model.sigma_mat[0].detach().clone()
    for it in range(5):
        xyzs = torch.rand(64, 3) * 2 - 1
        gt_sigma = (xyzs.norm(dim=-1) < 0.5).float()
        loss = train_step(model, offset_net, optimizer, xyzs, gt_sigma)
    assert all(p.grad is None for p in offset_net.parameters())
    assert all(torch.equal(b, p.detach()) for b, p in zip(offset_before, offset_net.parameters()))
    assert not torch.equal(plane_before, model.sigma_mat[0].detach())
    print("evidence holds: offset_net parameters have grad None and are unchanged after 5 Adam steps, "
          "while sigma_mat[0] changed (last loss %.4f)" % loss)
