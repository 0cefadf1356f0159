# source: https://github.com/open-mmlab/mmdetection/blob/master/mmdet/models/dense_heads/fcos_head.py
# category: DL203
# expect: clean
# evidence: with no positive location the head returns pos_bbox_preds.sum() / pos_centerness.sum(), which are zero but stay in the graph: backward works and the classification branch still trains.
import torch
import torch.nn as nn
import torch.nn.functional as F


def reduce_mean(tensor):
    return tensor  # single process


def sigmoid_focal_loss(pred, target_onehot, gamma=2.0, alpha=0.25, avg_factor=1.0):
    p = pred.sigmoid()
    ce = F.binary_cross_entropy_with_logits(pred, target_onehot, reduction="none")
    p_t = p * target_onehot + (1 - p) * (1 - target_onehot)
    a_t = alpha * target_onehot + (1 - alpha) * (1 - target_onehot)
    return (a_t * (1 - p_t) ** gamma * ce).sum() / avg_factor


def iou_loss(pred, target, weight, avg_factor):
    lt = torch.max(pred[:, :2], target[:, :2])
    rb = torch.min(pred[:, 2:], target[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, 0] * wh[:, 1]
    area_p = (pred[:, 2] - pred[:, 0]) * (pred[:, 3] - pred[:, 1])
    area_t = (target[:, 2] - target[:, 0]) * (target[:, 3] - target[:, 1])
    ious = inter / (area_p + area_t - inter).clamp(min=1e-6)
    return ((1 - ious) * weight).sum() / avg_factor


class FCOSHead(nn.Module):
    def __init__(self, num_classes=3, in_channels=8, feat_channels=8):
        super().__init__()
        self.num_classes = num_classes
        self.cls_convs = nn.Conv2d(in_channels, feat_channels, 3, padding=1)
        self.reg_convs = nn.Conv2d(in_channels, feat_channels, 3, padding=1)
        self.conv_cls = nn.Conv2d(feat_channels, num_classes, 3, padding=1)
        self.conv_reg = nn.Conv2d(feat_channels, 4, 3, padding=1)
        self.conv_centerness = nn.Conv2d(feat_channels, 1, 3, padding=1)

    def forward(self, x):
        cls_feat = F.relu(self.cls_convs(x))
        reg_feat = F.relu(self.reg_convs(x))
        return self.conv_cls(cls_feat), self.conv_reg(reg_feat).exp(), self.conv_centerness(reg_feat)

    def loss(self, cls_score, bbox_pred, centerness, labels, bbox_targets, points):
        flatten_cls_scores = cls_score.permute(0, 2, 3, 1).reshape(-1, self.num_classes)
        flatten_bbox_preds = bbox_pred.permute(0, 2, 3, 1).reshape(-1, 4)
        flatten_centerness = centerness.permute(0, 2, 3, 1).reshape(-1)
        flatten_labels = labels.reshape(-1)
        flatten_bbox_targets = bbox_targets.reshape(-1, 4)

        bg_class_ind = self.num_classes
        pos_inds = ((flatten_labels >= 0) & (flatten_labels < bg_class_ind)).nonzero().reshape(-1)
        num_pos = torch.tensor(len(pos_inds), dtype=torch.float)
        num_pos = max(reduce_mean(num_pos), 1.0)
        onehot = F.one_hot(flatten_labels.clamp(max=bg_class_ind), bg_class_ind + 1)[:, :bg_class_ind].float()
        loss_cls = sigmoid_focal_loss(flatten_cls_scores, onehot, avg_factor=num_pos)

        pos_bbox_preds = flatten_bbox_preds[pos_inds]
        pos_centerness = flatten_centerness[pos_inds]
        pos_bbox_targets = flatten_bbox_targets[pos_inds]

        if len(pos_inds) > 0:
            pos_points = points[pos_inds]
            pos_decoded_bbox_preds = torch.cat([pos_points - pos_bbox_preds[:, :2], pos_points + pos_bbox_preds[:, 2:]], 1)
            pos_decoded_target_preds = torch.cat([pos_points - pos_bbox_targets[:, :2], pos_points + pos_bbox_targets[:, 2:]], 1)
            pos_centerness_targets = torch.ones_like(pos_centerness)
            centerness_denorm = max(reduce_mean(pos_centerness_targets.sum().detach()), 1e-6)
            loss_bbox = iou_loss(pos_decoded_bbox_preds, pos_decoded_target_preds, pos_centerness_targets, centerness_denorm)
            loss_centerness = F.binary_cross_entropy_with_logits(pos_centerness, pos_centerness_targets)
        else:
            loss_bbox = pos_bbox_preds.sum()
            loss_centerness = pos_centerness.sum()

        return dict(loss_cls=loss_cls, loss_bbox=loss_bbox, loss_centerness=loss_centerness)


def parse_losses(losses):
    log_vars = {name: value.mean() for name, value in losses.items()}
    loss = sum(_value for _key, _value in log_vars.items() if 'loss' in _key)
    return loss, {k: v.item() for k, v in log_vars.items()}


if __name__ == "__main__":
    torch.manual_seed(0)
    head = FCOSHead()
    optimizer = torch.optim.SGD(head.parameters(), lr=0.05)
    feats = torch.randn(2, 8, 4, 4)
    ys, xs = torch.meshgrid(torch.arange(4.0), torch.arange(4.0), indexing="ij")
    points = torch.stack([xs.flatten(), ys.flatten()], 1).repeat(2, 1)
    labels = torch.full((2, 4, 4), 3)           # every location is background: no positives
    bbox_targets = torch.zeros(2, 4, 4, 4)

    cls_before = head.conv_cls.weight.detach().clone()
    for step in range(3):
        cls_score, bbox_pred, centerness = head(feats)
        losses = head.loss(cls_score, bbox_pred, centerness, labels, bbox_targets, points)
        loss, log_vars = parse_losses(losses)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        assert losses['loss_bbox'].grad_fn is not None and losses['loss_bbox'].item() == 0.0
        assert head.conv_reg.weight.grad is not None and head.conv_reg.weight.grad.abs().sum() == 0
        assert not torch.equal(cls_before, head.conv_cls.weight)
    print("evidence holds: empty-positive losses stay in the graph, backward succeeds and the classifier trains")
