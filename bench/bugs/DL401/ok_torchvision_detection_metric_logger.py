# source: https://github.com/pytorch/vision/blob/main/references/detection/engine.py
# category: DL401
# expect: clean
# evidence: train_one_epoch hands the loss tensors to MetricLogger.update, which converts every tensor with .item() before its SmoothedValue meters add it up, so the epoch's totals are floats and hold no graph
import math
import sys
from collections import defaultdict, deque

import torch
import torch.nn as nn
import torch.nn.functional as F


class SmoothedValue:
    def __init__(self, window_size=20, fmt=None):
        self.deque = deque(maxlen=window_size)
        self.total = 0.0
        self.count = 0
        self.fmt = fmt or "{median:.4f} ({global_avg:.4f})"

    def update(self, value, n=1):
        self.deque.append(value)
        self.count += n
        self.total += value * n

    @property
    def global_avg(self):
        return self.total / self.count


class MetricLogger:
    def __init__(self, delimiter="\t"):
        self.meters = defaultdict(SmoothedValue)
        self.delimiter = delimiter

    def update(self, **kwargs):
        for k, v in kwargs.items():
            if isinstance(v, torch.Tensor):
                v = v.item()
            assert isinstance(v, (float, int))
            self.meters[k].update(v)

    def add_meter(self, name, meter):
        self.meters[name] = meter

    def log_every(self, iterable, print_freq, header=None):
        for obj in iterable:
            yield obj


def get_world_size():
    return 1


def reduce_dict(input_dict, average=True):
    world_size = get_world_size()
    if world_size < 2:
        return input_dict
    with torch.inference_mode():
        names = sorted(input_dict.keys())
        values = torch.stack([input_dict[k] for k in names])
        if average:
            values /= world_size
        return {k: v for k, v in zip(names, values)}


class TinyDetector(nn.Module):
    def __init__(self, num_classes=3):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.cls_head = nn.Linear(8, num_classes)
        self.box_head = nn.Linear(8, 4)

    def forward(self, images, targets=None):
        feats = self.backbone(torch.stack(images))
        logits, boxes = self.cls_head(feats), self.box_head(feats)
        if self.training:
            labels = torch.stack([t["labels"][0] for t in targets])
            gt_boxes = torch.stack([t["boxes"][0] for t in targets])
            return {"loss_classifier": F.cross_entropy(logits, labels), "loss_box_reg": F.smooth_l1_loss(boxes, gt_boxes)}
        return [{"boxes": b, "scores": s.softmax(-1)} for b, s in zip(boxes, logits)]


def train_one_epoch(model, optimizer, data_loader, device, epoch, print_freq, scaler=None):
    model.train()
    metric_logger = MetricLogger(delimiter="  ")
    metric_logger.add_meter("lr", SmoothedValue(window_size=1, fmt="{value:.6f}"))
    header = f"Epoch: [{epoch}]"

    for images, targets in metric_logger.log_every(data_loader, print_freq, header):
        images = list(image.to(device) for image in images)
        targets = [{k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in t.items()} for t in targets]
        loss_dict = model(images, targets)
        losses = sum(loss for loss in loss_dict.values())

        # reduce losses over all GPUs for logging purposes
        loss_dict_reduced = reduce_dict(loss_dict)
        losses_reduced = sum(loss for loss in loss_dict_reduced.values())
        loss_value = losses_reduced.item()
        if not math.isfinite(loss_value):
            print(f"Loss is {loss_value}, stopping training")
            sys.exit(1)

        optimizer.zero_grad()
        losses.backward()
        optimizer.step()

        metric_logger.update(loss=losses_reduced, **loss_dict_reduced)
        metric_logger.update(lr=optimizer.param_groups[0]["lr"])
    return metric_logger


def make_loader(n, bsz=2):
    return [([torch.rand(3, 16, 16) for _ in range(bsz)],
             [{"boxes": torch.rand(1, 4), "labels": torch.randint(0, 3, (1,))} for _ in range(bsz)]) for _ in range(n)]


if __name__ == "__main__":
    torch.manual_seed(0)
    model = TinyDetector()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    w0 = model.cls_head.weight.detach().clone()
    logger = train_one_epoch(model, optimizer, make_loader(4), "cpu", epoch=0, print_freq=10)

    loss_meter = logger.meters["loss"]
    assert loss_meter.count == 4 and isinstance(loss_meter.total, float)
    assert all(isinstance(v, float) for v in loss_meter.deque)
    assert not torch.equal(w0, model.cls_head.weight.detach())
    print("evidence holds: the logged losses are floats (.item() inside MetricLogger.update); training proceeds")
