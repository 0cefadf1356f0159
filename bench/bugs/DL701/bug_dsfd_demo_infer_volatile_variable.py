# source: https://github.com/Tencent/FaceDetection-DSFD/issues/11
# category: DL701
# expect: flag 63, 66
# evidence: Variable(x, volatile=True) only warns "volatile was removed and now has no effect", so every net(x) in infer()/infer_flip() over the image loop returns detections with a grad_fn: the whole graph is built at test time.
from __future__ import division, print_function

import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable

widerface_640 = {"min_dim": 32, "conf_thresh": 0.05, "top_k": 5}
WIDERFace_CLASSES = ["face"]


class TestBaseTransform:
    def __init__(self, mean):
        self.mean = np.array(mean, dtype=np.float32)

    def __call__(self, image, boxes=None, labels=None):
        x = image.astype(np.float32) - self.mean
        return x, boxes, labels


class SSD(nn.Module):
    """Tiny stand-in for the ResNet-152 DSFD: feature extractor + conf/loc heads + Detect."""

    def __init__(self, phase, size, num_classes, top_k):
        super(SSD, self).__init__()
        self.phase = phase
        self.num_classes = num_classes
        self.top_k = top_k
        self.base = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU())
        self.loc = nn.Conv2d(8, 4, 3, padding=1)
        self.conf = nn.Conv2d(8, num_classes, 3, padding=1)

    def forward(self, x):
        f = self.base(x)
        loc = self.loc(f).permute(0, 2, 3, 1).reshape(x.size(0), -1, 4)
        conf = self.conf(f).permute(0, 2, 3, 1).reshape(x.size(0), -1, self.num_classes)
        scores = F.softmax(conf, dim=-1)
        # Detect: per class, keep top_k boxes sorted by score -> (1, num_classes, top_k, 5)
        out = []
        for c in range(self.num_classes):
            s, idx = scores[0, :, c].sort(descending=True)
            boxes = torch.sigmoid(loc[0, idx[: self.top_k]])
            out.append(torch.cat([s[: self.top_k, None], boxes], dim=1))
        return torch.stack(out)[None]


def build_ssd(phase, size, num_classes):
    return SSD(phase, size, num_classes, widerface_640["top_k"])


def infer(net, img, transform, thresh, cuda, shrink):
    if shrink != 1:
        h, w = int(img.shape[0] * shrink), int(img.shape[1] * shrink)
        img = img[np.linspace(0, img.shape[0] - 1, h).astype(int)][:, np.linspace(0, img.shape[1] - 1, w).astype(int)]
    x = torch.from_numpy(transform(img)[0]).permute(2, 0, 1)
    x = Variable(x.unsqueeze(0), volatile=True)
    if cuda:
        x = x.cuda()
    y = net(x)  # forward pass
    detections = y.data
    # scale each detection back up to the image
    scale = torch.Tensor([img.shape[1] / shrink, img.shape[0] / shrink, img.shape[1] / shrink, img.shape[0] / shrink])
    det = []
    for i in range(detections.size(1)):
        j = 0
        while j < detections.size(2) and detections[0, i, j, 0] >= thresh:
            score = detections[0, i, j, 0]
            pt = (detections[0, i, j, 1:] * scale).cpu().numpy()
            det.append([pt[0], pt[1], pt[2], pt[3], float(score)])
            j += 1
    if len(det) == 0:
        det = [[0.1, 0.1, 0.2, 0.2, 0.01]]
    return np.array(det)


def infer_flip(net, img, transform, thresh, cuda, shrink):
    img = np.ascontiguousarray(img[:, ::-1])
    det = infer(net, img, transform, thresh, cuda, shrink)
    det_t = np.zeros(det.shape)
    det_t[:, 0] = img.shape[1] - det[:, 2]
    det_t[:, 1] = det[:, 1]
    det_t[:, 2] = img.shape[1] - det[:, 0]
    det_t[:, 3] = det[:, 3]
    det_t[:, 4] = det[:, 4]
    return det_t


def bbox_vote(det):
    order = det[:, 4].ravel().argsort()[::-1]
    return det[order][:10]


def test_oneimage(net, img, transform, thresh, cuda):
    max_im_shrink = ((40.0 * 40.0) / (img.shape[0] * img.shape[1])) ** 0.5
    shrink = max_im_shrink if max_im_shrink < 1 else 1
    det0 = infer(net, img, transform, thresh, cuda, shrink)
    det1 = infer_flip(net, img, transform, thresh, cuda, shrink)
    # shrink detecting and shrink only detect big face
    st = 0.5 if max_im_shrink >= 0.75 else 0.5 * max_im_shrink
    det_s = infer(net, img, transform, thresh, cuda, st)
    det = np.vstack((det0, det1, det_s))
    return bbox_vote(det)


if __name__ == "__main__":
    torch.manual_seed(0)
    warnings.simplefilter("always")
    cfg = widerface_640
    num_classes = len(WIDERFace_CLASSES) + 1  # +1 background
    net = build_ssd("test", cfg["min_dim"], num_classes)  # initialize SSD
    net.eval()
    print("Finished loading model!")
    cuda = False
    transform = TestBaseTransform((104, 117, 123))
    thresh = cfg["conf_thresh"]

    outputs_with_graph = []
    net.register_forward_hook(lambda m, inp, out: outputs_with_graph.append(out.grad_fn is not None and out.requires_grad))

    rng = np.random.RandomState(0)
    images = [rng.randint(0, 255, (24, 20, 3)).astype(np.uint8) for _ in range(3)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for img in images:  # the reporter's loop over many images
            dets = test_oneimage(net, img, transform, thresh, cuda)
            assert dets.shape[1] == 5

    msgs = [str(w.message) for w in caught]
    assert any("volatile was removed and now has no effect" in m for m in msgs), msgs
    assert len(outputs_with_graph) == 9
    assert all(outputs_with_graph), outputs_with_graph
    print("evidence holds: volatile=True is ignored; all", len(outputs_with_graph), "test-time forward passes built autograd graphs")
