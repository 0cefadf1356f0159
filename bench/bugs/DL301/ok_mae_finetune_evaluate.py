# source: https://github.com/facebookresearch/mae/blob/main/engine_finetune.py
# category: DL301
# expect: clean
# evidence: evaluate() is decorated with @torch.no_grad(), so every model output produced during the evaluation loop has requires_grad=False and no grad_fn.
import math
from collections import defaultdict

import torch
import torch.nn as nn

torch.manual_seed(0)


class SmoothedValue:
    def __init__(self):
        self.total = 0.0
        self.count = 0

    def update(self, value, n=1):
        self.count += n
        self.total += value * n

    @property
    def global_avg(self):
        return self.total / max(1, self.count)


class MetricLogger:
    """Trimmed copy of util.misc.MetricLogger."""

    def __init__(self, delimiter="\t"):
        self.meters = defaultdict(SmoothedValue)
        self.delimiter = delimiter

    def update(self, **kwargs):
        for k, v in kwargs.items():
            self.meters[k].update(v)

    def __getattr__(self, attr):
        if attr in self.__dict__.get("meters", {}):
            return self.meters[attr]
        raise AttributeError(attr)

    def log_every(self, iterable, print_freq, header=None):
        for i, obj in enumerate(iterable):
            yield obj

    def synchronize_between_processes(self):
        pass


def accuracy(output, target, topk=(1,)):
    """timm.utils.accuracy"""
    maxk = min(max(topk), output.size()[1])
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.reshape(1, -1).expand_as(pred))
    return [correct[:min(k, maxk)].reshape(-1).float().sum(0) * 100. / batch_size for k in topk]


@torch.no_grad()
def evaluate(data_loader, model, device):
    criterion = torch.nn.CrossEntropyLoss()

    metric_logger = MetricLogger(delimiter="  ")
    header = 'Test:'

    # switch to evaluation mode
    model.eval()

    for batch in metric_logger.log_every(data_loader, 10, header):
        images = batch[0]
        target = batch[-1]
        images = images.to(device, non_blocking=True)
        target = target.to(device, non_blocking=True)

        # compute output
        with torch.autocast(device_type=device.type, enabled=False):
            output = model(images)
            loss = criterion(output, target)

        acc1, acc5 = accuracy(output, target, topk=(1, 5))

        batch_size = images.shape[0]
        metric_logger.update(loss=loss.item())
        metric_logger.meters['acc1'].update(acc1.item(), n=batch_size)
        metric_logger.meters['acc5'].update(acc5.item(), n=batch_size)
    # gather the stats from all processes
    metric_logger.synchronize_between_processes()
    print('* Acc@1 {top1.global_avg:.3f} Acc@5 {top5.global_avg:.3f} loss {losses.global_avg:.3f}'
          .format(top1=metric_logger.acc1, top5=metric_logger.acc5, losses=metric_logger.loss))

    return {k: meter.global_avg for k, meter in metric_logger.meters.items()}


class TinyViT(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.patch_embed = nn.Conv2d(3, 16, 4, 4)
        self.head = nn.Linear(16, num_classes)

    def forward(self, x):
        x = self.patch_embed(x).flatten(2).mean(-1)
        return self.head(x)


if __name__ == "__main__":
    device = torch.device("cpu")
    model = TinyViT()
    seen = []
    model.head.register_forward_hook(lambda m, i, o: seen.append((o.requires_grad, o.grad_fn)))
    dataset_val = torch.utils.data.TensorDataset(torch.randn(24, 3, 16, 16), torch.randint(0, 10, (24,)))
    data_loader_val = torch.utils.data.DataLoader(dataset_val, batch_size=8)
    test_stats = evaluate(data_loader_val, model, device)
    print(f"Accuracy of the network on the {len(dataset_val)} test images: {test_stats['acc1']:.1f}%")
    assert len(seen) == 3 and all(rg is False and fn is None for rg, fn in seen)
    assert torch.is_grad_enabled() and math.isfinite(test_stats['loss'])
    print("evidence holds: all", len(seen), "evaluation outputs were built without autograd")
