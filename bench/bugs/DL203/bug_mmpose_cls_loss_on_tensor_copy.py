# source: https://github.com/open-mmlab/mmpose/issues/2788
# category: DL203
# expect: flag 39, 64
# evidence: the new class loss is computed on torch.tensor(pre_cls), a copy without graph; the runner's backward raises "element 0 of tensors does not require grad"
from types import SimpleNamespace
from typing import Tuple

import torch
from torch import Tensor, nn
import torch.nn.functional as F


class RTMCCHeadWithCls(nn.Module):
    """SimCC keypoint head with an extra image-level class branch."""

    def __init__(self, in_channels=8, num_keypoints=5, simcc_bins=12, num_classes=3):
        super().__init__()
        self.final_layer = nn.Conv2d(in_channels, num_keypoints, 1)
        self.cls_x = nn.Linear(16, simcc_bins)
        self.cls_y = nn.Linear(16, simcc_bins)
        self.cls_head = nn.Linear(in_channels, num_classes)
        self.loss_module = nn.KLDivLoss(reduction='batchmean')
        self.cls_loss = nn.CrossEntropyLoss()

    def forward(self, feats: Tuple[Tensor]):
        feat = feats[-1]
        kpts = self.final_layer(feat).flatten(2)
        pred_x, pred_y = self.cls_x(kpts), self.cls_y(kpts)
        pre_cls = self.cls_head(feat.mean(dim=(2, 3)))
        return pred_x, pred_y, pre_cls

    def loss(self, feats: Tuple[Tensor], batch_data_samples, train_cfg={}) -> dict:
        pred_x, pred_y, pre_cls = self.forward(feats)

        gt_x = torch.cat([d.gt_instance_labels.keypoint_x_labels for d in batch_data_samples], dim=0)
        gt_y = torch.cat([d.gt_instance_labels.keypoint_y_labels for d in batch_data_samples], dim=0)
        cls_label = torch.tensor([d.gt_instances.category_id[0] for d in batch_data_samples], device=gt_x.device)

        pre_cls1 = torch.tensor(pre_cls, device=gt_x.device)

        keypoint_weights = torch.cat([d.gt_instance_labels.keypoint_weights for d in batch_data_samples], dim=0)
        pred_simcc = (pred_x, pred_y)
        gt_simcc = (gt_x, gt_y)

        losses = dict()
        # loss = self.loss_module(pred_simcc, gt_simcc, keypoint_weights)
        # losses.update(loss_kpt=loss)
        loss_cls = self.cls_loss(pre_cls1, cls_label)
        losses.update(loss_cls=loss_cls)
        return losses


def parse_losses(losses: dict):
    log_vars = {name: value.mean() for name, value in losses.items()}
    loss = sum(value for key, value in log_vars.items() if 'loss' in key)
    return loss, log_vars


def train_iter(backbone, head, data_batch, optim_wrapper):
    feats = (backbone(data_batch['inputs']),)
    losses = head.loss(feats, data_batch['data_samples'])
    parsed_losses, log_vars = parse_losses(losses)
    optim_wrapper.zero_grad()
    parsed_losses.backward()
    optim_wrapper.step()
    return log_vars


def make_sample(num_keypoints=5, bins=12, category=1):
    return SimpleNamespace(
        gt_instance_labels=SimpleNamespace(
            keypoint_x_labels=torch.softmax(torch.randn(1, num_keypoints, bins), -1),
            keypoint_y_labels=torch.softmax(torch.randn(1, num_keypoints, bins), -1),
            keypoint_weights=torch.ones(1, num_keypoints)),
        gt_instances=SimpleNamespace(category_id=[category]))


if __name__ == "__main__":
    torch.manual_seed(0)
    backbone = nn.Conv2d(3, 8, 3, padding=1)
    head = RTMCCHeadWithCls()
    optim_wrapper = torch.optim.AdamW(list(backbone.parameters()) + list(head.parameters()), lr=1e-3)
    data_batch = {'inputs': torch.randn(2, 3, 4, 4), 'data_samples': [make_sample(category=1), make_sample(category=2)]}
    try:
        train_iter(backbone, head, data_batch, optim_wrapper)
    except RuntimeError as err:
        assert "element 0 of tensors does not require grad and does not have a grad_fn" in str(err)
    else:
        raise AssertionError("backward on a loss of a tensor copy should raise")
    print("evidence holds: torch.tensor(pre_cls) copies the logits out of the graph, so the loss cannot backward")
