# source: https://github.com/tianrun-chen/SAM-Adapter-PyTorch/issues/89
# category: DL301
# expect: flag 87, 93
# evidence: Train.eval() switches the model to eval mode and runs model.infer on every validation batch with grad enabled: each mask prediction carries a grad_fn back to the prompt generator and mask decoder, and autograd saves the activations of every batch
import logging

import torch
import torch.nn as nn


class SAM(nn.Module):
    """Frozen image encoder with a trainable prompt generator and mask decoder (tiny version)."""

    def __init__(self, device='cpu'):
        super().__init__()
        self.device = device
        self.image_encoder = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.prompt_generator = nn.Conv2d(8, 8, 1)
        self.mask_decoder = nn.Conv2d(8, 1, 1)
        self.criterionBCE = nn.BCEWithLogitsLoss()
        self.optimizer = torch.optim.AdamW([p for n, p in self.named_parameters() if 'image_encoder' not in n], lr=1e-3)

    def infer(self, inp):
        feats = self.image_encoder(inp)
        return self.mask_decoder(feats + self.prompt_generator(feats))

    def set_input(self, inp, gt):
        self.input, self.gt_mask = inp, gt

    def optimize_parameters(self):
        self.optimizer.zero_grad()
        self.pred_mask = self.infer(self.input)
        self.loss_G = self.criterionBCE(self.pred_mask, self.gt_mask)
        self.loss_G.backward()
        self.optimizer.step()


class Metrics(object):
    def __init__(self, names):
        self.names = names
        self.reset()

    def reset(self):
        self.inter, self.union, self.count = 0.0, 0.0, 0

    def reset_current(self):
        self.current = None

    @torch.no_grad()
    def update(self, pred, gt):
        p = (pred > 0.5).int()
        self.current = ((p & gt).sum().item(), (p | gt).sum().item())
        self.inter += self.current[0]
        self.union += self.current[1]

    def compute(self):
        iou = torch.tensor(self.inter / max(self.union, 1))
        return {"JaccardIndex": (torch.tensor(self.current[0] / max(self.current[1], 1)), iou)}


class Writer(object):
    def __init__(self):
        self.pr_curves = []

    def write_metrics_and_means(self, metric_values, step):
        logging.info('step %d IoU %.4f', step, float(metric_values["JaccardIndex"][1]))

    def write_pr_curve(self, pred, gt, step):
        # like SummaryWriter.add_pr_curve, which converts its inputs to numpy
        self.pr_curves.append((step, pred.detach().cpu().numpy(), gt.detach().cpu().numpy()))


class Train:
    def __init__(self, model, val_loader):
        self.model = model
        self.val_loader = val_loader
        self.writer = Writer()
        self.validation_metric = Metrics(['JaccardIndex', 'DiceCoefficient'])

    def eval(self, epoch=None):
        self.model.eval()

        # Reset metrics (mean and current) for this epoch
        self.validation_metric.reset()
        metric_values = None

        for i, batch in enumerate(self.val_loader):
            for k, v in batch.items():
                batch[k] = v.to(self.model.device)

            inp = batch['inp']

            pred = torch.sigmoid(self.model.infer(inp))

            batch_pred = pred
            batch_gt = batch['gt']
            batch_gt = (batch_gt > 0).int()

            self.validation_metric.reset_current()
            self.validation_metric.update(batch_pred, batch_gt)
            metric_values = self.validation_metric.compute()

            self.writer.write_metrics_and_means(metric_values, epoch + i)
            self.writer.write_pr_curve(batch_pred, batch_gt, epoch + i)

        mean_IoU = metric_values["JaccardIndex"][1]
        return mean_IoU.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = SAM()
    val_loader = [{'inp': torch.rand(2, 3, 8, 8), 'gt': (torch.rand(2, 1, 8, 8) > 0.5).float()} for _ in range(3)]
    trainer = Train(model, val_loader)
    decoded = []
    model.mask_decoder.register_forward_hook(lambda mod, inp, out: decoded.append(out))
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        mean_iou = trainer.eval(epoch=1)
    assert not model.training and len(trainer.writer.pr_curves) == 3
    assert len(decoded) == 3 and all(p.grad_fn is not None for p in decoded)
    assert sum(saved) > 0
    grads = torch.autograd.grad(decoded[-1].sum(), model.prompt_generator.weight)
    assert grads[0].abs().sum() > 0
    print("evidence holds: %d validation mask predictions carry grad_fns into the prompt generator; %d bytes saved (IoU %.3f)"
          % (len(decoded), sum(saved), mean_iou))
