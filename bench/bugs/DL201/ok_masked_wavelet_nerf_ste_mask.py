# source: https://github.com/daniel03c1/masked_wavelet_nerf/issues/10
# category: DL201
# expect: clean
# evidence: the detach() only removes the hard-threshold part of a straight-through estimator; density planes, lines and both mask parameters all receive gradients and change after an Adam step
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class TensorVMSplit(nn.Module):
    def __init__(self, gridSize=(16, 16, 16), density_n_comp=(4, 4, 4), use_mask=True):
        super(TensorVMSplit, self).__init__()
        self.gridSize = gridSize
        self.density_n_comp = density_n_comp
        self.matMode = [[0, 1], [0, 2], [1, 2]]
        self.vecMode = [2, 1, 0]
        self.use_mask = use_mask
        self.init_svd_volume()

    def init_one_svd(self, n_component, gridSize, scale):
        plane_coef, line_coef = [], []
        for i in range(len(self.vecMode)):
            vec_id = self.vecMode[i]
            mat_id_0, mat_id_1 = self.matMode[i]
            plane_coef.append(nn.Parameter(scale * torch.randn((1, n_component[i], gridSize[mat_id_1], gridSize[mat_id_0]))))
            line_coef.append(nn.Parameter(scale * torch.randn((1, n_component[i], gridSize[vec_id], 1))))
        return nn.ParameterList(plane_coef), nn.ParameterList(line_coef)

    def init_svd_volume(self):
        self.density_plane, self.density_line = self.init_one_svd(self.density_n_comp, self.gridSize, 0.1)
        if self.use_mask:
            self.density_plane_mask = nn.ParameterList(
                [nn.Parameter(torch.ones_like(p) * 0.1 + 0.05 * torch.randn_like(p)) for p in self.density_plane])
            self.density_line_mask = nn.ParameterList(
                [nn.Parameter(torch.ones_like(l) * 0.1 + 0.05 * torch.randn_like(l)) for l in self.density_line])

    def compute_densityfeature(self, xyz_sampled):
        # plane + line basis
        coordinate_plane = torch.stack((xyz_sampled[..., self.matMode[0]], xyz_sampled[..., self.matMode[1]],
                                        xyz_sampled[..., self.matMode[2]])).detach().view(3, -1, 1, 2)
        coordinate_line = torch.stack((xyz_sampled[..., self.vecMode[0]], xyz_sampled[..., self.vecMode[1]],
                                       xyz_sampled[..., self.vecMode[2]]))
        coordinate_line = torch.stack((torch.zeros_like(coordinate_line), coordinate_line), dim=-1).detach().view(3, -1, 1, 2)

        sigma_feature = torch.zeros((xyz_sampled.shape[0],), device=xyz_sampled.device)
        for idx in range(len(self.density_plane)):
            plane = self.density_plane[idx]
            line = self.density_line[idx]
            if self.use_mask:
                mask = torch.sigmoid(self.density_plane_mask[idx])
                plane = (plane * (mask >= 0.5) - plane * mask).detach() \
                    + plane * mask
                mask = torch.sigmoid(self.density_line_mask[idx])
                line = (line * (mask >= 0.5) - line * mask).detach() \
                    + line * mask
            plane_coef_point = F.grid_sample(plane, coordinate_plane[[idx]], align_corners=True).view(-1, *xyz_sampled.shape[:1])
            line_coef_point = F.grid_sample(line, coordinate_line[[idx]], align_corners=True).view(-1, *xyz_sampled.shape[:1])
            sigma_feature = sigma_feature + torch.sum(plane_coef_point * line_coef_point, dim=0)
        return sigma_feature

    def get_mask_loss(self):
        loss = 0.
        for m in list(self.density_plane_mask) + list(self.density_line_mask):
            loss = loss + torch.sigmoid(m).mean()
        return loss


if __name__ == "__main__":
    tensorf = TensorVMSplit()
    grad_vars = list(tensorf.parameters())
    optimizer = torch.optim.Adam(grad_vars, lr=0.02, betas=(0.9, 0.99))
    before = [p.detach().clone() for p in grad_vars]

    xyz = torch.rand(256, 3) * 2 - 1
    gt_sigma = (xyz.norm(dim=-1) < 0.6).float()
    sigma = F.softplus(tensorf.compute_densityfeature(xyz))
    loss = F.mse_loss(sigma, gt_sigma) + 1e-3 * tensorf.get_mask_loss()
    optimizer.zero_grad()
    loss.backward()
    groups = {"density_plane": tensorf.density_plane, "density_line": tensorf.density_line,
              "density_plane_mask": tensorf.density_plane_mask, "density_line_mask": tensorf.density_line_mask}
    for name, plist in groups.items():
        for p in plist:
            assert p.grad is not None and p.grad.abs().sum() > 0, name
    optimizer.step()
    assert all(not torch.equal(b, p.detach()) for b, p in zip(before, grad_vars))
    print("evidence holds: planes, lines and both masks receive nonzero gradients through the "
          "straight-through estimator and all %d tensors change after the step" % len(grad_vars))
