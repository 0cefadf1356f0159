# source: https://github.com/hszhao/semseg/issues/60
# category: DL301
# expect: flag 72, 76
# evidence: validate() runs after model.eval() with no no_grad: every batch's segmentation output carries a grad_fn and autograd saves activations for a backward that never comes
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class AverageMeter(object):
    def __init__(self):
        self.val, self.sum, self.count, self.avg = 0, 0, 0, 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


class PSPNet(nn.Module):
    def __init__(self, classes=4, zoom_factor=8):
        super(PSPNet, self).__init__()
        self.zoom_factor = zoom_factor
        self.layer0 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True))
        self.ppm = nn.Sequential(nn.AdaptiveAvgPool2d(2), nn.Conv2d(8, 8, 1), nn.ReLU(inplace=True))
        self.cls = nn.Conv2d(16, classes, 1)

    def forward(self, x, y=None):
        h, w = x.shape[2:]
        f = self.layer0(x)
        p = F.interpolate(self.ppm(f), size=(h, w), mode='bilinear', align_corners=True)
        out = self.cls(torch.cat([f, p], 1))
        return out


def intersectionAndUnion(output, target, K, ignore_index=255):
    output = output.view(-1)
    target = target.view(-1)
    output[target == ignore_index] = ignore_index
    intersection = output[output == target]
    area_intersection = torch.histc(intersection.float(), bins=K, min=0, max=K - 1)
    area_output = torch.histc(output.float(), bins=K, min=0, max=K - 1)
    area_target = torch.histc(target.float(), bins=K, min=0, max=K - 1)
    area_union = area_output + area_target - area_intersection
    return area_intersection, area_union, area_target


class Args:
    classes = 4
    ignore_label = 255
    zoom_factor = 8
    print_freq = 2


args = Args()


def validate(val_loader, model, criterion):
    print('>>>>>>>>>>>>>>>> Start Evaluation >>>>>>>>>>>>>>>>')
    data_time = AverageMeter()
    loss_meter = AverageMeter()
    intersection_meter = AverageMeter()
    union_meter = AverageMeter()
    target_meter = AverageMeter()

    model.eval()
    end = time.time()
    for i, (input, target) in enumerate(val_loader):
        data_time.update(time.time() - end)
        input = input.to('cpu', non_blocking=True)
        target = target.to('cpu', non_blocking=True)
        output = model(input)
        loss = criterion(output, target)
        loss = torch.mean(loss)

        output = output.max(1)[1]
        intersection, union, target = intersectionAndUnion(output, target, args.classes, args.ignore_label)
        intersection, union, target = intersection.cpu().numpy(), union.cpu().numpy(), target.cpu().numpy()
        intersection_meter.update(intersection), union_meter.update(union), target_meter.update(target)
        loss_meter.update(loss.item(), input.size(0))
        end = time.time()
        if (i + 1) % args.print_freq == 0:
            print('Test: [{}/{}] Loss {:.4f}'.format(i + 1, len(val_loader), loss_meter.avg))

    iou_class = intersection_meter.sum / (union_meter.sum + 1e-10)
    mIoU = np.mean(iou_class)
    print('Val result: mIoU {:.4f}.'.format(mIoU))
    return loss_meter.avg, mIoU


if __name__ == "__main__":
    torch.manual_seed(0)
    model = PSPNet(classes=args.classes)
    criterion = nn.CrossEntropyLoss(ignore_index=args.ignore_label)
    val_loader = [(torch.randn(2, 3, 16, 16), torch.randint(0, 4, (2, 16, 16))) for _ in range(3)]

    model_outputs = []
    model.register_forward_hook(lambda mod, inp, out: model_outputs.append(out))
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        validate(val_loader, model, criterion)

    assert len(model_outputs) == 3
    assert all(o.requires_grad and o.grad_fn is not None for o in model_outputs)
    assert sum(saved) > 0
    print("evidence holds: all %d validation outputs carry a grad_fn; autograd saved %d bytes for backward during validate()"
          % (len(model_outputs), sum(saved)))
