# source: https://github.com/RangiLyu/nanodet/issues/7
# category: DL203
# expect: flag 60, 61, 62, 87
# evidence: a warm-up batch with no positive sample makes loss() return constants; run_step's backward raises "element 0 of tensors does not require grad"
import torch
import torch.nn as nn
import torch.nn.functional as F


def multi_apply(func, *args, **kwargs):
    results = map(lambda *a: func(*a, **kwargs), *args)
    return tuple(map(list, zip(*results)))


class GFLHead(nn.Module):
    def __init__(self, num_classes=3, in_channels=8, strides=(8, 16)):
        super().__init__()
        self.num_classes = num_classes
        self.strides = strides
        self.gfl_cls = nn.ModuleList(nn.Conv2d(in_channels, num_classes, 1) for _ in strides)
        self.gfl_reg = nn.ModuleList(nn.Conv2d(in_channels, 4, 1) for _ in strides)

    def forward(self, feats):
        cls_scores = [conv(f) for conv, f in zip(self.gfl_cls, feats)]
        bbox_preds = [conv(f) for conv, f in zip(self.gfl_reg, feats)]
        return cls_scores, bbox_preds

    def loss_single(self, cls_score, bbox_pred, labels, bbox_targets, stride, num_total_samples):
        cls_score = cls_score.permute(0, 2, 3, 1).reshape(-1, self.num_classes)
        bbox_pred = bbox_pred.permute(0, 2, 3, 1).reshape(-1, 4)
        labels = labels.reshape(-1)
        bbox_targets = bbox_targets.reshape(-1, 4)
        pos_inds = torch.nonzero((labels >= 0) & (labels < self.num_classes), as_tuple=False).squeeze(1)
        score = torch.zeros_like(cls_score)
        if len(pos_inds) > 0:
            weight_targets = cls_score.detach().sigmoid()[pos_inds].max(dim=1)[0]
            loss_bbox = (F.l1_loss(bbox_pred[pos_inds], bbox_targets[pos_inds] / stride, reduction='none')
                         .sum(1) * weight_targets).sum()
            loss_dfl = bbox_pred[pos_inds].pow(2).mean() * 0.25
            score[pos_inds, labels[pos_inds]] = 1.0
        else:
            loss_bbox = bbox_pred.sum() * 0
            loss_dfl = bbox_pred.sum() * 0
            weight_targets = torch.tensor(0)
        loss_qfl = F.binary_cross_entropy_with_logits(cls_score, score, reduction='sum') / num_total_samples
        return loss_qfl, loss_bbox, loss_dfl, weight_targets.sum()

    def loss(self, preds, gt_meta):
        cls_scores, bbox_preds = preds
        labels_list, bbox_targets_list = gt_meta['labels'], gt_meta['bbox_targets']
        num_total_pos = sum(int(((l >= 0) & (l < self.num_classes)).sum()) for l in labels_list)
        num_total_samples = max(float(num_total_pos), 1.0)

        losses_qfl, losses_bbox, losses_dfl, avg_factor = multi_apply(
            self.loss_single, cls_scores, bbox_preds, labels_list, bbox_targets_list, self.strides,
            num_total_samples=num_total_samples)

        avg_factor = sum(avg_factor).item()
        if avg_factor <= 0:
            loss_qfl = torch.tensor(0, dtype=torch.float32)
            loss_bbox = torch.tensor(0, dtype=torch.float32)
            loss_dfl = torch.tensor(0, dtype=torch.float32)
        else:
            losses_bbox = list(map(lambda x: x / avg_factor, losses_bbox))
            losses_dfl = list(map(lambda x: x / avg_factor, losses_dfl))
            loss_qfl = sum(losses_qfl)
            loss_bbox = sum(losses_bbox)
            loss_dfl = sum(losses_dfl)

        loss = loss_qfl + loss_bbox + loss_dfl
        loss_states = dict(loss_qfl=loss_qfl, loss_bbox=loss_bbox, loss_dfl=loss_dfl)
        return loss, loss_states


class Trainer:
    def __init__(self, model, backbone):
        self.model = model
        self.backbone = backbone
        params = list(model.parameters()) + list(backbone.parameters())
        self.optimizer = torch.optim.SGD(params, lr=0.01, momentum=0.9)

    def run_step(self, batch):
        feats = [self.backbone(batch['img']), F.avg_pool2d(self.backbone(batch['img']), 2)]
        output = self.model(feats)
        loss, loss_stats = self.model.loss(output, batch['gt_meta'])
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return output, loss, loss_stats

    def warm_up(self, train_loader):
        for batch in train_loader:
            self.run_step(batch)


def make_batch(n_pos, num_classes=3):
    labels = [torch.full((2, 4, 4), num_classes), torch.full((2, 2, 2), num_classes)]
    labels[0].view(-1)[:n_pos] = 1
    return {'img': torch.randn(2, 3, 4, 4),
            'gt_meta': {'labels': labels, 'bbox_targets': [torch.rand(2, 4, 4, 4) * 8, torch.rand(2, 2, 2, 4) * 16]}}


if __name__ == "__main__":
    torch.manual_seed(0)
    trainer = Trainer(GFLHead(), nn.Conv2d(3, 8, 3, padding=1))
    trainer.warm_up([make_batch(n_pos=3)])  # an ordinary batch trains
    try:
        trainer.warm_up([make_batch(n_pos=0)])  # a batch whose images have no matched box
    except RuntimeError as err:
        assert "element 0 of tensors does not require grad and does not have a grad_fn" in str(err)
    else:
        raise AssertionError("backward on the constant losses should raise")
    print("evidence holds: with no positives loss() replaces every term by a constant tensor and backward raises")
