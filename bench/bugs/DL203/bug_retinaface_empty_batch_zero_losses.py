# source: https://github.com/supernotman/RetinaFace_Pytorch/issues/6
# category: DL203
# expect: flag 43, 44, 45, 94
# evidence: when no image of the batch has a face, every per-image loss is a plain torch.tensor(0).float(), and loss.backward() raises "element 0 of tensors does not require grad and does not have a grad_fn".
import torch
import torch.nn as nn
import torch.nn.functional as F


def box_iou(a, b):
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    lt = torch.max(a[:, None, :2], b[None, :, :2])
    rb = torch.min(a[:, None, 2:], b[None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[..., 0] * wh[..., 1]
    return inter / (area_a[:, None] + area_b[None, :] - inter)


class LossLayer(nn.Module):
    def __init__(self):
        super(LossLayer, self).__init__()
        self.smoothl1 = nn.SmoothL1Loss()

    def forward(self, classifications, bbox_regressions, ldm_regressions, anchors, annotations):
        batch_size = classifications.shape[0]
        classification_losses = []
        bbox_regression_losses = []
        ldm_regression_losses = []
        anchor = anchors[0, :, :]

        for j in range(batch_size):
            classification = classifications[j, :, :]
            bbox_regression = bbox_regressions[j, :, :]
            ldm_regression = ldm_regressions[j, :, :]

            annotation = annotations[j, :, :]
            annotation = annotation[annotation[:, 0] > 0]
            bbox_annotation = annotation[:, :4]
            ldm_annotation = annotation[:, 4:]

            if bbox_annotation.shape[0] == 0:
                bbox_regression_losses.append(torch.tensor(0).float())
                classification_losses.append(torch.tensor(0).float())
                ldm_regression_losses.append(torch.tensor(0).float())
                continue

            IoU = box_iou(anchor, bbox_annotation)
            IoU_max, IoU_argmax = torch.max(IoU, dim=1)
            positive_indices = torch.ge(IoU_max, 0.3)
            targets = positive_indices.long()
            classification_losses.append(F.cross_entropy(classification, targets))

            assigned = bbox_annotation[IoU_argmax, :]
            if positive_indices.sum() > 0:
                bbox_regression_losses.append(self.smoothl1(bbox_regression[positive_indices], assigned[positive_indices] - anchor[positive_indices]))
                ldm_regression_losses.append(self.smoothl1(ldm_regression[positive_indices], ldm_annotation[IoU_argmax][positive_indices]))
            else:
                bbox_regression_losses.append(bbox_regression.sum() * 0)
                ldm_regression_losses.append(ldm_regression.sum() * 0)

        return torch.stack(classification_losses), torch.stack(bbox_regression_losses), torch.stack(ldm_regression_losses)


class RetinaFaceLike(nn.Module):
    def __init__(self, num_anchors=16):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(4))
        self.class_head = nn.Conv2d(8, 2, 1)
        self.bbox_head = nn.Conv2d(8, 4, 1)
        self.ldm_head = nn.Conv2d(8, 10, 1)
        xs, ys = torch.meshgrid(torch.arange(4.0), torch.arange(4.0), indexing="ij")
        cx, cy = (xs.flatten() + 0.5) * 4, (ys.flatten() + 0.5) * 4
        self.register_buffer("anchors", torch.stack([cx - 3, cy - 3, cx + 3, cy + 3], 1)[None])
        self.losslayer = LossLayer()

    def forward(self, inputs):
        img_batch, annotations = inputs
        feat = self.body(img_batch)
        b = img_batch.shape[0]
        classifications = self.class_head(feat).flatten(2).transpose(1, 2)
        bbox_regressions = self.bbox_head(feat).flatten(2).transpose(1, 2)
        ldm_regressions = self.ldm_head(feat).flatten(2).transpose(1, 2)
        return self.losslayer(classifications, bbox_regressions, ldm_regressions, self.anchors.expand(b, -1, -1), annotations)


def train_one_batch(retinaface, optimizer, img_batch, annotations):
    optimizer.zero_grad()
    classification_loss, bbox_regression_loss, ldm_regression_loss = retinaface([img_batch, annotations])
    classification_loss = classification_loss.mean()
    bbox_regression_loss = bbox_regression_loss.mean()
    ldm_regression_loss = ldm_regression_loss.mean()
    loss = classification_loss + 0.25 * bbox_regression_loss + 0.1 * ldm_regression_loss
    loss.backward()
    optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    retinaface = RetinaFaceLike()
    optimizer = torch.optim.SGD(retinaface.parameters(), lr=0.01)

    faces = torch.full((2, 3, 14), -1.0)
    faces[0, 0, :4] = torch.tensor([2.0, 2.0, 8.0, 8.0])
    faces[0, 0, 4:] = torch.rand(10) * 8
    print("batch with faces, loss =", train_one_batch(retinaface, optimizer, torch.randn(2, 3, 16, 16), faces))

    no_faces = torch.full((2, 3, 14), -1.0)
    try:
        train_one_batch(retinaface, optimizer, torch.randn(2, 3, 16, 16), no_faces)
    except RuntimeError as e:
        print("RuntimeError:", e)
        assert "does not require grad and does not have a grad_fn" in str(e)
    else:
        raise AssertionError("expected backward() to fail on a batch without faces")
    print("evidence holds: a batch without any face yields losses made only of torch.tensor(0) and backward() raises")
