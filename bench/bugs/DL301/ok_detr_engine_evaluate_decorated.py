# source: https://github.com/facebookresearch/detr/blob/main/engine.py
# category: DL301
# expect: clean
# evidence: evaluate() is decorated with @torch.no_grad(): its loop after model.eval() builds no graph, while train_one_epoch backpropagates normally
import math
import sys
from typing import Iterable

import torch
from torch import nn
import torch.nn.functional as F


class TinyDETR(nn.Module):
    def __init__(self, num_queries=4, num_classes=3):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.class_embed = nn.Linear(8, num_queries * (num_classes + 1))
        self.bbox_embed = nn.Linear(8, num_queries * 4)
        self.num_queries, self.num_classes = num_queries, num_classes

    def forward(self, samples):
        h = self.backbone(samples)
        return {
            'pred_logits': self.class_embed(h).view(-1, self.num_queries, self.num_classes + 1),
            'pred_boxes': self.bbox_embed(h).view(-1, self.num_queries, 4).sigmoid(),
        }


class SetCriterion(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight_dict = {'loss_ce': 1.0, 'loss_bbox': 5.0}

    def forward(self, outputs, targets):
        labels = torch.stack([t['labels'] for t in targets])
        boxes = torch.stack([t['boxes'] for t in targets])
        loss_ce = F.cross_entropy(outputs['pred_logits'].flatten(0, 1), labels.flatten())
        loss_bbox = F.l1_loss(outputs['pred_boxes'], boxes)
        return {'loss_ce': loss_ce, 'loss_bbox': loss_bbox,
                'class_error': 100 - (outputs['pred_logits'].argmax(-1) == labels).float().mean() * 100}


class PostProcess(nn.Module):
    @torch.no_grad()
    def forward(self, outputs, target_sizes):
        prob = F.softmax(outputs['pred_logits'], -1)
        scores, labels = prob[..., :-1].max(-1)
        img_h, img_w = target_sizes.unbind(1)
        scale_fct = torch.stack([img_w, img_h, img_w, img_h], dim=1)
        boxes = outputs['pred_boxes'] * scale_fct[:, None, :]
        return [{'scores': s, 'labels': l, 'boxes': b} for s, l, b in zip(scores, labels, boxes)]


def train_one_epoch(model: torch.nn.Module, criterion: torch.nn.Module, data_loader: Iterable,
                    optimizer: torch.optim.Optimizer, device: torch.device, epoch: int, max_norm: float = 0):
    model.train()
    criterion.train()
    for samples, targets in data_loader:
        samples = samples.to(device)
        targets = [{k: v.to(device) for k, v in t.items()} for t in targets]
        outputs = model(samples)
        loss_dict = criterion(outputs, targets)
        weight_dict = criterion.weight_dict
        losses = sum(loss_dict[k] * weight_dict[k] for k in loss_dict.keys() if k in weight_dict)
        loss_value = losses.item()
        if not math.isfinite(loss_value):
            print("Loss is {}, stopping training".format(loss_value))
            sys.exit(1)
        optimizer.zero_grad()
        losses.backward()
        if max_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
    return loss_value


@torch.no_grad()
def evaluate(model, criterion, postprocessors, data_loader, device):
    model.eval()
    criterion.eval()
    stats, all_results = [], {}
    for samples, targets in data_loader:
        samples = samples.to(device)
        targets = [{k: v.to(device) for k, v in t.items()} for t in targets]

        outputs = model(samples)
        loss_dict = criterion(outputs, targets)
        weight_dict = criterion.weight_dict
        stats.append(sum(loss_dict[k] * weight_dict[k] for k in loss_dict.keys() if k in weight_dict))

        orig_target_sizes = torch.stack([t["orig_size"] for t in targets], dim=0)
        results = postprocessors['bbox'](outputs, orig_target_sizes)
        res = {target['image_id'].item(): output for target, output in zip(targets, results)}
        all_results.update(res)
    return stats, all_results


def make_batch(start_id, n=4, num_queries=4):
    samples = torch.randn(n, 3, 16, 16)
    targets = [{'labels': torch.randint(0, 3, (num_queries,)), 'boxes': torch.rand(num_queries, 4),
                'orig_size': torch.tensor([16, 16]), 'image_id': torch.tensor(start_id + i)} for i in range(n)]
    return samples, targets


if __name__ == "__main__":
    torch.manual_seed(0)
    device = torch.device("cpu")
    model, criterion = TinyDETR(), SetCriterion()
    postprocessors = {'bbox': PostProcess()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = [make_batch(4 * i) for i in range(3)]
    before = [p.detach().clone() for p in model.parameters()]
    train_one_epoch(model, criterion, loader, optimizer, device, epoch=0, max_norm=0.1)
    stats, results = evaluate(model, criterion, postprocessors, loader, device)
    assert all(s.grad_fn is None and not s.requires_grad for s in stats)
    assert len(results) == 12 and all(not r['scores'].requires_grad for r in results.values())
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
    print("evidence holds: evaluation losses and detections carry no graph; training changed the weights")
