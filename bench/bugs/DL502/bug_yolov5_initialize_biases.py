# source: https://github.com/ultralytics/yolov5/issues/1552
# category: DL502
# expect: flag 64, 65
# evidence: Model.__init__ calls _initialize_biases, whose b[:, 4] += ... edits a view of the Detect conv bias (a leaf Parameter that requires grad) outside no_grad and raises "a view of a leaf Variable that requires grad is being used in an in-place operation".
import math

import torch
import torch.nn as nn


class Detect(nn.Module):
    stride = None  # strides computed during build

    def __init__(self, nc=80, anchors=(), ch=()):  # detection layer
        super(Detect, self).__init__()
        self.nc = nc  # number of classes
        self.no = nc + 5  # number of outputs per anchor
        self.nl = len(anchors)  # number of detection layers
        self.na = len(anchors[0]) // 2  # number of anchors
        self.grid = [torch.zeros(1)] * self.nl  # init grid
        a = torch.tensor(anchors).float().view(self.nl, -1, 2)
        self.register_buffer('anchors', a)  # shape(nl,na,2)
        self.m = nn.ModuleList(nn.Conv2d(x, self.no * self.na, 1) for x in ch)  # output conv

    def forward(self, x):
        for i in range(self.nl):
            x[i] = self.m[i](x[i])  # conv
            bs, _, ny, nx = x[i].shape
            x[i] = x[i].view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
        return x


class Model(nn.Module):
    def __init__(self, ch=3, nc=4):
        super(Model, self).__init__()
        anchors = [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119]]
        self.backbone = nn.ModuleList([nn.Conv2d(ch, 8, 3, 2, 1), nn.Conv2d(8, 16, 3, 2, 1)])
        self.model = nn.Sequential(*self.backbone, Detect(nc, anchors, (8, 16)))

        # Build strides, anchors
        m = self.model[-1]  # Detect()
        if isinstance(m, Detect):
            s = 64  # 2x min stride
            m.stride = torch.tensor([s / x.shape[-2] for x in self.forward_features(torch.zeros(1, ch, s, s))])
            m.anchors /= m.stride.view(-1, 1, 1)
            self.stride = m.stride
            self._initialize_biases()  # only run once

    def forward_features(self, x):
        y = []
        for conv in self.backbone:
            x = torch.relu(conv(x))
            y.append(x)
        return y

    def forward(self, x):
        return self.model[-1](self.forward_features(x))

    def _initialize_biases(self, cf=None):  # initialize biases into Detect(), cf is class frequency
        # https://arxiv.org/abs/1708.02002 section 3.3
        m = self.model[-1]  # Detect() module
        for mi, s in zip(m.m, m.stride):  # from
            b = mi.bias.view(m.na, -1)  # conv.bias(255) to (3,85)
            b[:, 4] += math.log(8 / (640 / s) ** 2)  # obj (8 objects per 640 image)
            b[:, 5:] += math.log(0.6 / (m.nc - 0.99)) if cf is None else torch.log(cf / cf.sum())  # cls
            mi.bias = torch.nn.Parameter(b.view(-1), requires_grad=True)


if __name__ == "__main__":
    torch.manual_seed(0)
    try:
        model = Model(ch=3, nc=4)
        raised = None
    except RuntimeError as e:
        raised = str(e)

    assert raised is not None and "leaf Variable that requires grad is being used in an in-place operation" in raised, raised
    print("evidence holds: building the model raised:", raised)
