# source: https://github.com/YBIGTA/pytorch-hair-segmentation/issues/28
# category: DL301
# expect: flag 72, 79
# evidence: the module-level evaluate loop calls net(data) with autograd on; every logit passed to the metrics and durations list carries a grad_fn, so each image's graph is built and never used.
import time

import numpy as np
import torch
import torch.nn as nn


class PSPNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.feats = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.psp = nn.ModuleList([nn.Conv2d(8, 4, 1) for _ in range(2)])
        self.final = nn.Conv2d(8 + 2 * 4, 1, 1)

    def forward(self, x):
        f = self.feats(x)
        features = [f] + [stage(f) for stage in self.psp]
        p = torch.cat(features, dim=1)
        return self.final(p)


def get_network(name):
    return PSPNet()


class IoU:
    def __init__(self, thrs=0.5):
        self._thrs = thrs
        self.reset()

    def reset(self):
        self._num_intersect = 0
        self._num_union = 0

    def update(self, output):
        logit, y = output
        y_pred = torch.sigmoid(logit) >= self._thrs
        y = y.bool()
        self._num_intersect += torch.sum(y_pred & y).item()
        self._num_union += torch.sum(y_pred | y).item()

    def compute(self):
        return self._num_intersect / max(self._num_union, 1)


class F1score(IoU):
    def compute(self):
        return 2 * self._num_intersect / max(self._num_intersect + self._num_union, 1)


test_loader = [(torch.randn(1, 3, 16, 16), (torch.rand(1, 1, 16, 16) > 0.5).float()) for _ in range(4)]
device = 'cpu'

if __name__ == '__main__':
    torch.manual_seed(0)
    # prepare network with trained parameters
    net = get_network('pspnet').to(device)

    # prepare measurements
    metric_iou = IoU()
    metric_iou.reset()
    metric_f = F1score()
    metric_f.reset()
    durations = list()
    logits_have_graph = list()
    net.register_forward_hook(lambda m, inp, out: logits_have_graph.append(out.grad_fn is not None))

    for i, (data, label) in enumerate(test_loader):
        print('[{:3d}/{:3d}] processing image... '.format(i+1, len(test_loader)))
        net.eval()
        data, label = data.to(device), label.to(device)

        # inference
        start = time.time()
        logit = net(data)
        duration = time.time() - start

        # prepare mask
        pred = torch.sigmoid(logit.cpu())[0][0].data.numpy()
        mh, mw = data.size(2), data.size(3)
        mask = pred >= 0.5

        mask_n = np.zeros((mh, mw, 3))
        mask_n[:, :, 0] = 255
        mask_n[:, :, 0] *= mask

        # log measurements
        metric_iou.update((logit, label))
        metric_f.update((logit, label))
        durations.append(duration)

    # compute measurements
    iou = metric_iou.compute()
    f = metric_f.compute()
    print('F-measure:', f)
    print('IOU:', iou)

    assert logits_have_graph == [True] * 4
    assert all(p.grad is None for p in net.parameters())
    print("evidence holds: all 4 inference logits of the module-level loop carry a grad_fn, no backward ever runs")
