# source: https://github.com/facebookresearch/fairchem/pull/199
# category: DL301
# expect: flag 72, 75
# evidence: ForcesTrainer.validate runs self._forward on every val batch with grad mode on, so each output carries a grad_fn and its graph although validate never calls backward.
import torch
import torch.nn as nn
from collections import defaultdict


class Evaluator:
    def __init__(self, task="s2ef"):
        self.task = task

    def eval(self, out, batch, prev_metrics):
        metrics = dict(prev_metrics)
        mae = (out["energy"] - batch["energy"]).abs().mean().item()
        metrics = self.update("energy_mae", mae, metrics)
        fmae = (out["forces"] - batch["forces"]).abs().mean().item()
        metrics = self.update("forces_mae", fmae, metrics)
        return metrics

    def update(self, key, stat, metrics):
        if key not in metrics:
            metrics[key] = {"metric": None, "total": 0, "numel": 0}
        metrics[key]["total"] += stat
        metrics[key]["numel"] += 1
        metrics[key]["metric"] = metrics[key]["total"] / metrics[key]["numel"]
        return metrics


class SchNetLike(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.embed = nn.Linear(3, hidden)
        self.energy_head = nn.Linear(hidden, 1)
        self.force_head = nn.Linear(hidden, 3)

    def forward(self, batch):
        h = torch.tanh(self.embed(batch["pos"]))
        energy = self.energy_head(h).sum().view(1)
        forces = self.force_head(h)
        return energy, forces


class ForcesTrainer:
    def __init__(self, model, val_loader):
        self.name = "s2ef"
        self.model = model
        self.val_loader = val_loader
        self.scaler = None
        self.ema = None
        self.loss_fn = {"energy": nn.L1Loss(), "force": nn.L1Loss()}

    def _forward(self, batch):
        out_energy, out_forces = self.model(batch)
        return {"energy": out_energy, "forces": out_forces}

    def _compute_loss(self, out, batch):
        loss = [self.loss_fn["energy"](out["energy"], batch["energy"])]
        loss.append(30 * self.loss_fn["force"](out["forces"], batch["forces"]))
        return sum(loss)

    def _compute_metrics(self, out, batch, evaluator, metrics={}):
        return evaluator.eval(out, batch, prev_metrics=metrics)

    def validate(self, split="val", disable_tqdm=False):
        print("### Evaluating on {}.".format(split))
        self.model.eval()
        evaluator, metrics = Evaluator(task=self.name), {}
        loader = self.val_loader

        for i, batch in enumerate(loader):
            # Forward.
            with torch.autocast("cpu", enabled=self.scaler is not None):
                out = self._forward(batch)
            loss = self._compute_loss(out, batch)

            # Compute metrics.
            metrics = self._compute_metrics(out, batch, evaluator, metrics)
            metrics = evaluator.update("loss", loss.item(), metrics)

        log_dict = {k: metrics[k]["metric"] for k in metrics}
        return metrics, log_dict


if __name__ == "__main__":
    torch.manual_seed(0)
    val_loader = [
        {"pos": torch.randn(5, 3), "energy": torch.randn(1), "forces": torch.randn(5, 3)}
        for _ in range(4)
    ]
    trainer = ForcesTrainer(SchNetLike(), val_loader)

    kept = []
    trainer.model.register_forward_hook(lambda m, inp, out: kept.append(out[1].grad_fn))
    metrics, log_dict = trainer.validate(split="val")

    assert len(kept) == len(val_loader)
    assert all(g is not None for g in kept), "every validation forward recorded a graph"
    assert all(p.grad is None for p in trainer.model.parameters()), "validate never backpropagates"
    print("evidence holds: validate built", len(kept), "autograd graphs and never called backward")
