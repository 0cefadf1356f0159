# source: https://github.com/utiasSTARS/liegroups/issues/4
# category: DL402
# expect: flag 37
# evidence: SO2.from_matrix validates the predicted rotation with np.linalg.det(mat.cpu().numpy()); inside the training loss the prediction requires grad and the call raises "Can't call numpy() on Tensor that requires grad"
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def allclose(mat1, mat2, tol=1e-6):
    return (mat1 - mat2).abs().lt(tol).all()


class SO2:
    """Rotation matrices in 2D (torch backend), in the style of the library's _base classes."""

    dim = 2
    dof = 1

    def __init__(self, mat):
        self.mat = mat

    @classmethod
    def is_valid_matrix(cls, mat):
        if mat.dim() < 3:
            mat = mat.unsqueeze(dim=0)
        # Check the shape
        shape_check = mat.shape[1:3] == (cls.dim, cls.dim)
        if not shape_check:
            return False
        # Check that the matrices are orthogonal
        mat_trans = torch.transpose(mat, 1, 2)
        eye = torch.eye(cls.dim, dtype=mat.dtype).expand_as(mat)
        orth_check = allclose(mat.bmm(mat_trans), eye, tol=1e-4)
        # Check that the determinants are 1
        det = torch.as_tensor(np.linalg.det(mat.cpu().numpy()), dtype=mat.dtype).to(mat.device)
        det_check = allclose(det, torch.ones_like(det), tol=1e-4)
        return bool(shape_check and orth_check and det_check)

    @classmethod
    def from_matrix(cls, mat, normalize=False):
        mat_is_valid = cls.is_valid_matrix(mat)
        if mat_is_valid or normalize:
            return cls(mat)
        raise ValueError("Invalid rotation matrix. Use normalize=True to handle rounding errors.")

    def log(self):
        mat = self.mat if self.mat.dim() == 3 else self.mat.unsqueeze(0)
        return torch.atan2(mat[:, 1, 0], mat[:, 0, 0])


class RotationHead(nn.Module):
    """Predicts an angle from a pair of point clouds and returns its rotation matrix."""

    def __init__(self, n_points=8):
        super().__init__()
        self.fc = nn.Linear(4 * n_points, 1)

    def forward(self, src, tgt):
        theta = self.fc(torch.cat([src.flatten(1), tgt.flatten(1)], dim=1)).squeeze(1)
        c, s = torch.cos(theta), torch.sin(theta)
        return torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)


def rotation_loss(rotation_ab_pred, angle_gt):
    rvec_ab_pred = SO2.from_matrix(rotation_ab_pred)
    return F.mse_loss(rvec_ab_pred.log(), angle_gt)


def train_one_epoch(net, loader, opt):
    net.train()
    total = 0.0
    for src, tgt, angle_gt in loader:
        rotation_ab_pred = net(src, tgt)
        loss = rotation_loss(rotation_ab_pred, angle_gt)
        opt.zero_grad()
        loss.backward()
        opt.step()
        total += loss.item()
    return total


if __name__ == "__main__":
    torch.manual_seed(0)
    net = RotationHead()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    loader = [(torch.randn(4, 8, 2), torch.randn(4, 8, 2), torch.rand(4)) for _ in range(2)]

    with torch.no_grad():  # validating a prediction outside training works
        assert SO2.is_valid_matrix(net(*loader[0][:2]))

    try:
        train_one_epoch(net, loader, opt)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised is not None and "Can't call numpy() on Tensor that requires grad" in raised, raised
    print("evidence holds: the determinant check converts the grad-carrying prediction to numpy and raises in the loss")
