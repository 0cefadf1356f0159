# source: https://github.com/ultralytics/ultralytics/issues/13285
# category: DL203
# expect: flag 50
# evidence: backward on the logged loss items raises "element 0 of tensors does not require grad and does not have a grad_fn"
import torch
import torch.nn as nn
import torch.nn.functional as F


class TinyDetector(nn.Module):
    """One detection head: per-anchor box regression and class scores."""

    def __init__(self, nc=3, reg=4):
        super().__init__()
        self.nc = nc
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.head = nn.Conv2d(8, reg + nc, 1)

    def forward(self, x):
        return self.head(F.silu(self.stem(x)))


class DetectionLoss:
    """Same contract as v8DetectionLoss: returns (loss to backprop, detached items to log)."""

    def __init__(self, model, box=7.5, cls=0.5, dfl=1.5):
        self.nc = model.nc
        self.hyp = (box, cls, dfl)

    def __call__(self, preds, batch):
        loss = torch.zeros(3)
        pred_boxes, pred_scores = preds.split((4, self.nc), dim=1)
        batch_size = preds.shape[0]
        loss[0] = F.l1_loss(pred_boxes, batch["bboxes"])
        loss[1] = F.binary_cross_entropy_with_logits(pred_scores, batch["cls"])
        loss[2] = pred_boxes.pow(2).mean() * 0.01
        loss[0] *= self.hyp[0]
        loss[1] *= self.hyp[1]
        loss[2] *= self.hyp[2]
        return loss.sum() * batch_size, loss.detach()


def ensemble_train_step(model_1, model_2, batch, optimizer):
    criterion = DetectionLoss(model_1)
    pred1 = model_1(batch["img"])
    pred2 = model_2(batch["img"])
    loss1, lossitem1 = criterion(pred1, batch)
    loss2, lossitem2 = criterion(pred2, batch)
    optimizer.zero_grad()
    lossitem1.backward()
    optimizer.step()
    return loss1, lossitem1, loss2, lossitem2


def make_batch(n=2, nc=3, hw=8):
    return {
        "img": torch.randn(n, 3, hw, hw),
        "bboxes": torch.rand(n, 4, hw, hw),
        "cls": (torch.rand(n, nc, hw, hw) > 0.8).float(),
    }


if __name__ == "__main__":
    torch.manual_seed(0)
    model_1, model_2 = TinyDetector(), TinyDetector()
    optimizer = torch.optim.SGD(list(model_1.parameters()) + list(model_2.parameters()), lr=0.01)
    try:
        ensemble_train_step(model_1, model_2, make_batch(), optimizer)
    except RuntimeError as err:
        assert "element 0 of tensors does not require grad and does not have a grad_fn" in str(err)
    else:
        raise AssertionError("backward on the detached loss items should raise")
    assert all(p.grad is None for p in model_1.parameters())
    print("evidence holds: lossitem1 is loss.detach(); calling backward on it raises and trains nothing")
