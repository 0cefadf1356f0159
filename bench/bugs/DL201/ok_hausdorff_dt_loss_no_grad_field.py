# source: https://github.com/JunMa11/SegLossOdyssey/issues/17
# category: DL201
# expect: clean
# evidence: the distance maps are computed under torch.no_grad from numpy and enter the loss only as constant weights; the (pred - target)**2 term keeps the graph, so every segmentation-net parameter gets a non-zero gradient and changes after training.
import numpy as np
import torch
from torch import nn


def edt(mask):
    """numpy stand-in for scipy.ndimage.distance_transform_edt on a tiny 2D/3D grid:
    distance of every non-zero voxel to the nearest zero voxel (0 on zero voxels)."""
    coords = np.argwhere(np.ones_like(mask, dtype=bool))
    zeros = np.argwhere(~mask)
    out = np.zeros(mask.shape, dtype=np.float64)
    if len(zeros) == 0:
        return out
    d = np.sqrt(((coords[:, None, :] - zeros[None, :, :]) ** 2).sum(-1)).min(1)
    out[tuple(coords.T)] = d
    out[~mask] = 0.0
    return out


class HausdorffDTLoss(nn.Module):
    """Binary Hausdorff loss based on distance transform"""

    def __init__(self, alpha=2.0, **kwargs):
        super(HausdorffDTLoss, self).__init__()
        self.alpha = alpha

    @torch.no_grad()
    def distance_field(self, img: np.ndarray) -> np.ndarray:
        field = np.zeros_like(img)

        for batch in range(len(img)):
            fg_mask = img[batch] > 0.5

            if fg_mask.any():
                bg_mask = ~fg_mask

                fg_dist = edt(fg_mask)
                bg_dist = edt(bg_mask)

                field[batch] = fg_dist + bg_dist

        return field

    def forward(self, pred: torch.Tensor, target: torch.Tensor, debug=False) -> torch.Tensor:
        """
        Uses one binary channel: 1 - fg, 0 - bg
        pred: (b, 1, x, y, z) or (b, 1, x, y)
        target: (b, 1, x, y, z) or (b, 1, x, y)
        """
        assert pred.dim() == 4 or pred.dim() == 5, "Only 2D and 3D supported"
        assert pred.dim() == target.dim(), "Prediction and target need to be of same dimension"

        pred_dt = torch.from_numpy(self.distance_field(pred.detach().cpu().numpy())).float()
        target_dt = torch.from_numpy(self.distance_field(target.cpu().numpy())).float()

        pred_error = (pred - target) ** 2
        distance = pred_dt ** self.alpha + target_dt ** self.alpha

        dt_field = pred_error * distance
        loss = dt_field.mean()

        return loss


class TinySegNet(nn.Module):
    def __init__(self):
        super(TinySegNet, self).__init__()
        self.body = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 1, 3, padding=1))

    def forward(self, x):
        return torch.sigmoid(self.body(x))


def run_training(network, loss_fn, optimizer, data, target, num_iters=4):
    grads_ok = []
    for it in range(num_iters):
        optimizer.zero_grad()
        output = network(data)
        l = loss_fn(output, target)
        l.backward()
        grads_ok.append(all(p.grad is not None and p.grad.abs().sum().item() > 0 for p in network.parameters()))
        optimizer.step()
    return grads_ok


if __name__ == "__main__":
    torch.manual_seed(0)
    data = torch.rand(2, 1, 8, 8)
    target = torch.zeros(2, 1, 8, 8)
    target[:, :, 2:6, 3:7] = 1.0
    network = TinySegNet()
    loss_fn = HausdorffDTLoss()
    optimizer = torch.optim.SGD(network.parameters(), lr=0.01, momentum=0.9)
    before = [p.detach().clone() for p in network.parameters()]
    grads_ok = run_training(network, loss_fn, optimizer, data, target)
    assert all(grads_ok), grads_ok
    with torch.no_grad():
        assert all(not torch.equal(b, p) for b, p in zip(before, network.parameters()))
    print("evidence holds: HausdorffDTLoss trains every network parameter despite the no_grad/numpy distance maps")
