# source: https://github.com/XiaMooo/Yolo-Detect-Layer-Visualization/issues/1
# category: DL402
# expect: flag 54, 68
# evidence: the detect-layer maps come straight from the model's forward (grad on), so plot_multi_heatmap's array.cpu().numpy() raises "Can't call numpy() on Tensor that requires grad"
import math

import numpy as np
import torch
import torch.nn as nn


class Detect(nn.Module):
    """Per-scale heads: (bs, na, ny, nx, 5 + nc) raw predictions."""

    def __init__(self, nc=2, ch=(8, 16), na=3):
        super().__init__()
        self.nc, self.na, self.no = nc, na, nc + 5
        self.m = nn.ModuleList(nn.Conv2d(c, self.no * self.na, 1) for c in ch)

    def forward(self, xs):
        out = []
        for conv, x in zip(self.m, xs):
            bs, _, ny, nx = x.shape
            out.append(conv(x).view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous())
        return out


class TinyYolo(nn.Module):
    def __init__(self, nc=2):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.SiLU())
        self.down = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.SiLU())
        self.detect = Detect(nc=nc)

    def forward(self, x):
        p3 = self.stem(x)
        p4 = self.down(p3)
        return self.detect([p3, p4])


def heatmap_image(array):
    """Stand-in for sns.heatmap: min-max normalise to an 8-bit image."""
    lo, hi = array.min(), array.max()
    return ((array - lo) / (hi - lo + 1e-12) * 255).astype(np.uint8)


def plot_multi_heatmap(*arrays, title=None, row=None, col=None):
    n = len(arrays)
    col = col or math.ceil(math.sqrt(n))
    row = row or math.ceil(n / col)
    panels = []
    for i, array in enumerate(arrays):
        if isinstance(array, torch.Tensor):
            array = array.cpu().numpy()
        r, c = i // col, i % col
        panels.append(((r, c), heatmap_image(array)))
    return panels


def letterbox(img, new_shape=32):
    h, w = img.shape[-2:]
    pad_h, pad_w = new_shape - h, new_shape - w
    return torch.nn.functional.pad(img, (pad_w // 2, pad_w - pad_w // 2, pad_h // 2, pad_h - pad_h // 2), value=0.5)


def visualize_objectness(model, img):
    model.eval()
    preds = model(letterbox(img).unsqueeze(0))
    maps = []
    for p in preds:
        for a in range(p.shape[1]):
            maps.append(p[0, a, :, :, 4].sigmoid())
    return plot_multi_heatmap(*maps, title="objectness")


if __name__ == "__main__":
    torch.manual_seed(0)
    model = TinyYolo()
    img = torch.rand(3, 28, 30)

    preds = model(letterbox(img).unsqueeze(0))
    assert preds[0].requires_grad  # the maps handed to the plot carry the graph

    try:
        visualize_objectness(model, img)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised is not None and "Can't call numpy() on Tensor that requires grad" in raised, raised

    panels = plot_multi_heatmap(torch.rand(4, 4), torch.rand(4, 4))  # plain tensors plot fine
    assert len(panels) == 2
    print("evidence holds: the objectness maps from the forward pass make array.cpu().numpy() raise")
