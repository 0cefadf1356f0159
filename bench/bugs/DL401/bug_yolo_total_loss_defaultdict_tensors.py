# source: https://github.com/MultimediaTechLab/YOLO/pull/83
# category: DL401
# expect: flag 87
# evidence: the per-epoch loss dict starts as tensors and adds the loss components returned by train_one_batch (which still carry grad_fns), so every batch's graph stays reachable from the returned totals
from collections import defaultdict
from typing import Dict

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


class YOLOLoss:
    """Box / DFL / class terms; returns the total and the components for logging."""

    def __call__(self, aux_predicts, main_predicts, targets):
        aux_box, aux_cls = aux_predicts
        main_box, main_cls = main_predicts
        box_loss = F.smooth_l1_loss(main_box, targets["boxes"]) + 0.25 * F.smooth_l1_loss(aux_box, targets["boxes"])
        dfl_loss = (main_box - aux_box).abs().mean()
        cls_loss = F.binary_cross_entropy_with_logits(main_cls, targets["cls"]) \
            + 0.25 * F.binary_cross_entropy_with_logits(aux_cls, targets["cls"])
        loss = 7.5 * box_loss + 1.5 * dfl_loss + 0.5 * cls_loss
        loss_dict = {"Loss/BoxLoss": box_loss, "Loss/DFLoss": dfl_loss, "Loss/BCELoss": cls_loss}
        return loss, loss_dict


class TinyYOLO(nn.Module):
    def __init__(self, n_cls=3):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.SiLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.main = nn.Linear(8, 4 + n_cls)
        self.aux = nn.Linear(8, 4 + n_cls)

    def forward(self, x):
        h = self.backbone(x)
        return {"Main": self.main(h), "AUX": self.aux(h)}


def vec2box(predicts):
    return predicts[:, :4], predicts[:, 4:]


class ProgressLogger:
    def __init__(self):
        self.batch_logs = []

    def one_batch(self, loss_dict: Dict[str, Tensor]):
        self.batch_logs.append("|".join(f"{k}:{v.item():.3f}" for k, v in loss_dict.items()))


class ModelTrainer:
    def __init__(self, model, device="cpu"):
        self.model = model
        self.device = device
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        self.loss_fn = YOLOLoss()
        self.vec2box = vec2box
        self.progress = ProgressLogger()
        self.scheduler = None
        self.use_ddp = False

    def train_one_batch(self, images: Tensor, targets):
        images = images.to(self.device)
        self.optimizer.zero_grad()

        predicts = self.model(images)
        aux_predicts = self.vec2box(predicts["AUX"])
        main_predicts = self.vec2box(predicts["Main"])
        loss, loss_item = self.loss_fn(aux_predicts, main_predicts, targets)

        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=10.0)
        self.optimizer.step()

        return loss_item

    def train_one_epoch(self, dataloader):
        self.model.train()
        total_loss = defaultdict(lambda: torch.tensor(0.0, device=self.device))
        total_samples = 0
        for batch_size, images, targets, *_ in dataloader:
            loss_each = self.train_one_batch(images, targets)

            for loss_name, loss_val in loss_each.items():
                total_loss[loss_name] += loss_val * batch_size
            total_samples += batch_size
            self.progress.one_batch(loss_each)

        for loss_val in total_loss.values():
            loss_val /= total_samples

        if self.scheduler:
            self.scheduler.step()

        return total_loss


def graph_nodes(t):
    seen, stack = set(), [t.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is not None and fn not in seen:
            seen.add(fn)
            stack.extend(next_fn for next_fn, _ in fn.next_functions)
    return len(seen)


def make_loader(n, bsz=2):
    return [(bsz, torch.rand(bsz, 3, 16, 16),
             {"boxes": torch.rand(bsz, 4), "cls": torch.randint(0, 2, (bsz, 3)).float()}) for _ in range(n)]


if __name__ == "__main__":
    torch.manual_seed(0)
    sizes = []
    for n_batches in (2, 4, 6):
        trainer = ModelTrainer(TinyYOLO())
        totals = trainer.train_one_epoch(make_loader(n_batches))
        assert all(v.grad_fn is not None for v in totals.values())
        sizes.append(graph_nodes(totals["Loss/BoxLoss"]))
    assert sizes[0] < sizes[1] < sizes[2], sizes
    print("evidence holds: the epoch loss totals keep each batch's graph: %s nodes for 2/4/6 batches" % sizes)
