# source: https://github.com/LukasHedegaard/ride/pull/12
# category: DL203
# expect: flag 63, 121
# evidence: the Trainer stand-in calls backward on training_step(...)["loss"] and gets "element 0 of tensors does not require grad and does not have a grad_fn", because common_step returns everything through detach_to_cpu.
"""
ride/lifecycle.py (Lifecycle.common_step, training_step, detach_to_cpu, prefix_keys) before the
"Avoid detaching loss in step" fix; MetricMixin/LightningModule/Trainer are minimal stand-ins.
"""
import argparse
import collections
from operator import attrgetter
from typing import Any, Dict, Sequence, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class LightningModule(nn.Module):
    def log(self, name, value, prog_bar=False, logger=True, sync_dist=False):
        self.logged_metrics = getattr(self, "logged_metrics", {})
        self.logged_metrics[name] = value.item()


class MetricMixin:
    def collect_metrics(self, preds: Tensor, targets: Tensor):
        return {k: v for k, v in self.metrics_step(preds, targets).items()}


def prefix_keys(prefix: str, dictionary: Dict) -> Dict:
    return {f"{prefix}{k}": v for k, v in dictionary.items()}


def detach_to_cpu(x: Union[Tensor, Sequence[Tensor], Dict[Any, Tensor]]):
    if isinstance(x, Tensor):
        return x.detach().cpu()
    if isinstance(x, collections.abc.Sequence):
        return [detach_to_cpu(t) for t in x]
    if isinstance(x, dict):
        return {k: detach_to_cpu(v) for k, v in x.items()}
    return x


class Lifecycle(MetricMixin):
    def __init__(self, hparams=None, *args, **kwargs):
        self._epoch = 0
        self._sync_dist = False
        self.loss = attrgetter(hparams.loss)(F)

    def metrics_step(self, preds: torch.Tensor, targets: torch.Tensor, **kwargs):
        return {"loss": self.loss(preds, targets)}

    def common_step(self, pred, target, prefix="train/", log=False):
        opt_key = prefix + self.hparams.optimization_metric
        loss_key = prefix + "loss"
        metrics = prefix_keys(prefix, self.collect_metrics(pred, target))
        if log:
            LightningModule.log(self, name=f"step_{loss_key}", value=metrics[loss_key], prog_bar=True,
                                logger=True, sync_dist=self._sync_dist)
            if opt_key != loss_key and opt_key in metrics:
                LightningModule.log(self, name=f"step_{opt_key}", value=metrics[opt_key], prog_bar=True,
                                    logger=True, sync_dist=self._sync_dist)
        return detach_to_cpu(
            {
                "loss": metrics[loss_key],
                **metrics,
                "pred": pred,
                "target": target,
            }
        )

    def preprocess_batch(self, batch):
        return batch

    def training_step(self, batch, batch_idx=None):
        batch = self.preprocess_batch(batch)
        x, target = batch[0], batch[1]
        pred = self.forward(x)
        return self.common_step(pred, target, prefix="train/", log=True)

    def training_epoch_end(self, step_outputs):
        self._epoch += 1
        self.epoch_loss = torch.mean(torch.stack([x["train/loss"] for x in step_outputs])).item()

    def validation_step(self, batch, batch_idx=None):
        batch = self.preprocess_batch(batch)
        x, target = batch[0], batch[1]
        pred = self.forward(x)
        return self.common_step(pred, target, prefix="val/")


class SimpleClassifier(LightningModule, Lifecycle):
    def __init__(self, hparams):
        LightningModule.__init__(self)
        self.hparams = hparams
        Lifecycle.__init__(self, hparams)
        self.l1 = nn.Linear(8, 16)
        self.l2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.l2(F.relu(self.l1(x)))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.learning_rate)


class Trainer:
    """What pytorch_lightning's automatic optimisation does with a training_step output."""

    def __init__(self, max_epochs=1):
        self.max_epochs = max_epochs

    def fit(self, model, train_dataloader):
        optimizer = model.configure_optimizers()
        for epoch in range(self.max_epochs):
            step_outputs = []
            for batch_idx, batch in enumerate(train_dataloader):
                out = model.training_step(batch, batch_idx)
                closure_loss = out["loss"] if isinstance(out, dict) else out
                optimizer.zero_grad()
                closure_loss.backward()
                optimizer.step()
                step_outputs.append(out)
            model.training_epoch_end(step_outputs)


if __name__ == "__main__":
    torch.manual_seed(0)
    hparams = argparse.Namespace(loss="cross_entropy", optimization_metric="loss", learning_rate=0.1, gpus=None)
    model = SimpleClassifier(hparams)
    train_dataloader = [(torch.randn(4, 8), torch.randint(0, 3, (4,))) for _ in range(3)]
    trainer = Trainer(max_epochs=1)
    try:
        trainer.fit(model, train_dataloader)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised is not None and "does not require grad and does not have a grad_fn" in raised, raised
    assert model.l1.weight.grad is None
    print("evidence holds: backward on the step loss fails:", raised)
