# source: https://github.com/biubug6/Pytorch_Retinaface/blob/master/test_widerface.py
# category: DL301
# expect: clean
# evidence: torch.set_grad_enabled(False) before net.eval() and the test loop turns grad off for the whole run: no detection output carries a graph
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn


class RetinaFace(nn.Module):
    def __init__(self, phase='train', num_anchors=32):
        super().__init__()
        self.phase = phase
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten())
        self.bbox_head = nn.Linear(8 * 16, num_anchors * 4)
        self.class_head = nn.Linear(8 * 16, num_anchors * 2)
        self.landmark_head = nn.Linear(8 * 16, num_anchors * 10)
        self.num_anchors = num_anchors

    def forward(self, inputs):
        f = self.body(inputs)
        loc = self.bbox_head(f).view(-1, self.num_anchors, 4)
        conf = self.class_head(f).view(-1, self.num_anchors, 2)
        landms = self.landmark_head(f).view(-1, self.num_anchors, 10)
        if self.phase == 'test':
            conf = torch.softmax(conf, dim=-1)
        return loc, conf, landms


def decode(loc, priors, variances):
    boxes = torch.cat((priors[:, :2] + loc[:, :2] * variances[0] * priors[:, 2:],
                       priors[:, 2:] * torch.exp(loc[:, 2:] * variances[1])), 1)
    boxes[:, :2] -= boxes[:, 2:] / 2
    boxes[:, 2:] += boxes[:, :2]
    return boxes


def py_cpu_nms(dets, thresh):
    order = dets[:, 4].argsort()[::-1]
    return list(order[: max(1, len(order) // 2)])


def run(args, test_dataset, cfg):
    torch.set_grad_enabled(False)
    # net and model
    net = RetinaFace(phase='test')
    net.eval()
    device = torch.device("cpu")
    net = net.to(device)
    priors = torch.rand(net.num_anchors, 4)
    all_dets, raw_outputs = {}, []

    # testing begin
    for i, (img_name, img_raw) in enumerate(test_dataset):
        img = np.float32(img_raw)
        im_height, im_width, _ = img.shape
        scale = torch.Tensor([img.shape[1], img.shape[0], img.shape[1], img.shape[0]])
        img -= (104, 117, 123)
        img = img.transpose(2, 0, 1)
        img = torch.from_numpy(img).unsqueeze(0)
        img = img.to(device)
        scale = scale.to(device)

        loc, conf, landms = net(img)  # forward pass
        raw_outputs.append(conf)
        boxes = decode(loc.squeeze(0), priors, cfg['variance'])
        boxes = boxes * scale
        boxes = boxes.cpu().numpy()
        scores = conf.squeeze(0).cpu().numpy()[:, 1]

        # ignore low scores
        inds = np.where(scores > args.confidence_threshold)[0]
        boxes = boxes[inds]
        scores = scores[inds]

        # keep top-K before NMS
        order = scores.argsort()[::-1][:args.top_k]
        boxes = boxes[order]
        scores = scores[order]

        # do NMS
        dets = np.hstack((boxes, scores[:, np.newaxis])).astype(np.float32, copy=False)
        keep = py_cpu_nms(dets, args.nms_threshold)
        dets = dets[keep, :]
        all_dets[img_name] = dets[:args.keep_top_k, :]
    return all_dets, raw_outputs


if __name__ == '__main__':
    torch.manual_seed(0)
    args = SimpleNamespace(confidence_threshold=0.02, top_k=5000, nms_threshold=0.3, keep_top_k=750)
    cfg = {'variance': [0.1, 0.2]}
    rng = np.random.RandomState(0)
    test_dataset = [(f'img_{i}.jpg', rng.randint(0, 255, size=(24, 32, 3)).astype(np.uint8)) for i in range(3)]
    all_dets, raw_outputs = run(args, test_dataset, cfg)
    assert not torch.is_grad_enabled()
    assert len(all_dets) == 3 and all(d.shape[1] == 5 for d in all_dets.values())
    assert all(c.grad_fn is None and not c.requires_grad for c in raw_outputs)
    print("evidence holds: grad mode is off for the test run; detections and raw outputs carry no graph")
