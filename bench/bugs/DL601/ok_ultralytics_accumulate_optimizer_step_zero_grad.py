# source: https://github.com/ultralytics/ultralytics/pull/11217
# category: DL601
# expect: clean
# evidence: the batch loop only calls backward(); gradients are accumulated on purpose over `accumulate` batches and optimizer_step() zeroes them right after each step, so every update uses exactly one accumulation window.
from types import SimpleNamespace

import torch
import torch.nn as nn


class DetectionModelStub(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 12), nn.SiLU(), nn.Linear(12, 1))

    def forward(self, batch):
        pred = self.net(batch["img"])
        loss = ((pred - batch["target"]) ** 2).sum()
        return loss, loss.detach().unsqueeze(0)


class BaseTrainer:
    def __init__(self, cfg):
        self.args = cfg
        self.model = DetectionModelStub()
        self.amp = False
        self.scaler = torch.amp.GradScaler("cpu", enabled=self.amp)
        self.ema = None
        nbs = 8
        self.accumulate = max(round(nbs / self.args.batch), 1)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=self.args.lr0, momentum=0.9)
        self.step_log = []

    def preprocess_batch(self, batch):
        return batch

    def optimizer_step(self):
        """Perform a single step of the training optimizer with gradient clipping and EMA update."""
        self.scaler.unscale_(self.optimizer)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=10.0)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad()
        if self.ema:
            self.ema.update(self.model)

    def _do_train(self, train_loader):
        nb = len(train_loader)
        last_opt_step = -1
        self.optimizer.zero_grad()
        for epoch in range(self.args.epochs):
            self.model.train()
            for i, batch in enumerate(train_loader):
                ni = i + nb * epoch
                with torch.autocast("cpu", enabled=self.amp):
                    batch = self.preprocess_batch(batch)
                    self.loss, self.loss_items = self.model(batch)
                    self.tloss = self.loss_items

                self.scaler.scale(self.loss).backward()

                if ni - last_opt_step >= self.accumulate:
                    grad_sum = sum(p.grad.abs().sum().item() for p in self.model.parameters())
                    self.optimizer_step()
                    last_opt_step = ni
                    left = sum(p.grad.abs().sum().item() for p in self.model.parameters() if p.grad is not None)
                    self.step_log.append((ni, grad_sum, left))


if __name__ == "__main__":
    torch.manual_seed(0)
    trainer = BaseTrainer(SimpleNamespace(batch=4, lr0=1e-2, epochs=2))
    loader = [{"img": torch.randn(4, 6), "target": torch.randn(4, 1)} for _ in range(5)]
    w0 = trainer.model.net[0].weight.detach().clone()
    trainer._do_train(loader)

    assert trainer.accumulate == 2
    assert len(trainer.step_log) >= 3
    assert all(grad_sum > 0 and left == 0.0 for _, grad_sum, left in trainer.step_log), trainer.step_log
    assert not torch.equal(w0, trainer.model.net[0].weight)
    print("evidence holds: %d optimizer steps, each followed by zero gradients (zero_grad inside "
          "optimizer_step), weights updated" % len(trainer.step_log))
