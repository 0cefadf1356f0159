# source: https://github.com/lucidrains/invariant-point-attention/issues/9
# category: DL205
# expect: flag 65
# evidence: with detach_rotations on, the forward raises "Can't detach views in-place" because quaternion_to_matrix returns a reshape view
import torch
import torch.nn.functional as F
from torch import nn, einsum


def exists(val):
    return val is not None


def quaternion_to_matrix(quaternions):
    r, i, j, k = torch.unbind(quaternions, -1)
    two_s = 2.0 / (quaternions * quaternions).sum(-1)
    o = torch.stack((
        1 - two_s * (j * j + k * k), two_s * (i * j - k * r), two_s * (i * k + j * r),
        two_s * (i * j + k * r), 1 - two_s * (i * i + k * k), two_s * (j * k - i * r),
        two_s * (i * k - j * r), two_s * (j * k + i * r), 1 - two_s * (i * i + j * j),
    ), -1)
    return o.reshape(quaternions.shape[:-1] + (3, 3))


def quaternion_multiply(a, b):
    aw, ax, ay, az = torch.unbind(a, -1)
    bw, bx, by, bz = torch.unbind(b, -1)
    return torch.stack((aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                        aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw), -1)


class IPABlock(nn.Module):
    """Stand-in for invariant point attention: mixes features with rotated point offsets."""

    def __init__(self, dim):
        super().__init__()
        self.to_points = nn.Linear(dim, 3)
        self.to_out = nn.Linear(dim + 3, dim)

    def forward(self, x, *, rotations, translations, pairwise_repr=None):
        points = einsum('b n c, b n c r -> b n r', self.to_points(x), rotations) + translations
        return x + self.to_out(torch.cat([x, points], dim=-1))


class IPATransformer(nn.Module):
    def __init__(self, dim=8, depth=2, detach_rotations=True):
        super().__init__()
        self.detach_rotations = detach_rotations
        self.quaternion_to_matrix = quaternion_to_matrix
        self.quaternion_multiply = quaternion_multiply
        self.layers = nn.ModuleList([nn.ModuleList([IPABlock(dim), nn.Linear(dim, 6)]) for _ in range(depth)])

    def forward(self, single_repr, *, translations=None, quaternions=None, pairwise_repr=None):
        x = single_repr
        b, n, *_ = x.shape
        if not exists(quaternions):
            quaternions = torch.tensor([1., 0., 0., 0.]).expand(b, n, 4)
        if not exists(translations):
            translations = torch.zeros((b, n, 3))

        for block, to_update in self.layers:
            rotations = self.quaternion_to_matrix(quaternions)

            if self.detach_rotations:
                rotations.detach_()

            x = block(x, pairwise_repr=pairwise_repr, rotations=rotations, translations=translations)

            quaternion_update, translation_update = to_update(x).chunk(2, dim=-1)
            quaternion_update = F.pad(quaternion_update, (1, 0), value=1.)
            quaternions = self.quaternion_multiply(quaternions, quaternion_update)
            translations = translations + einsum('b n c, b n c r -> b n r', translation_update, rotations)
        return x, translations, quaternions


if __name__ == "__main__":
    torch.manual_seed(0)
    net = IPATransformer(dim=8, depth=2, detach_rotations=True)
    seq = torch.randn(1, 5, 8)
    try:
        net(seq)
    except RuntimeError as err:
        assert "Can't detach views in-place" in str(err)
    else:
        raise AssertionError("detach_ on the reshaped rotations should raise")
    net.detach_rotations = False
    x, translations, quaternions = net(seq)
    assert x.shape == (1, 5, 8)
    print("evidence holds: rotations is a view from reshape, and rotations.detach_() refuses to detach it in place")
