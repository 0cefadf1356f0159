# source: https://github.com/Lightning-AI/pytorch-lightning/issues/18254
# category: DL303
# expect: flag 19, 23, 114
# evidence: the trainer runs training_step + backward as a closure inside AdamW.step, which is decorated with @torch.no_grad(); the forward pass is recorded with no graph and backward raises "element 0 of tensors does not require grad".
import math

import torch
from torch.optim import Optimizer
from torch.utils.data import DataLoader, Dataset


class AdamW(Optimizer):
    """Hugging Face transformers.optimization.AdamW (v4.30-style step)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0, correct_bias=True):
        defaults = {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay, "correct_bias": correct_bias}
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()

        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                beta1, beta2 = group["betas"]
                state["step"] += 1
                exp_avg.mul_(beta1).add_(grad, alpha=(1.0 - beta1))
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
                denom = exp_avg_sq.sqrt().add_(group["eps"])
                step_size = group["lr"]
                if group["correct_bias"]:
                    bias_correction1 = 1.0 - beta1 ** state["step"]
                    bias_correction2 = 1.0 - beta2 ** state["step"]
                    step_size = step_size * math.sqrt(bias_correction2) / bias_correction1
                p.addcdiv_(exp_avg, denom, value=-step_size)
                if group["weight_decay"] > 0.0:
                    p.add_(p, alpha=(-group["lr"] * group["weight_decay"]))
        return loss


class RandomDataset(Dataset):
    def __init__(self, length):
        self.len = length
        self.data = torch.randn(length, 31)
        self.label = torch.zeros(length, dtype=torch.long)

    def __getitem__(self, index):
        return self.data[index], self.label[index]

    def __len__(self):
        return self.len


class BoringModel(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(31, 2)
        self.loss_fn = torch.nn.CrossEntropyLoss()

    def forward(self, x):
        return self.layer(x)

    def training_step(self, batch, batch_idx):
        input = batch[0]
        label = batch[1]
        out = self.layer(input)
        loss = self.loss_fn(out, label)
        return {"loss": loss}

    def configure_optimizers(self):
        return AdamW(self.parameters(), lr=0.1)


class Closure:
    """Lightning's automatic-optimization closure: training_step, zero_grad, backward."""

    def __init__(self, step_fn, backward_fn, zero_grad_fn):
        self._step_fn = step_fn
        self._backward_fn = backward_fn
        self._zero_grad_fn = zero_grad_fn

    def closure(self):
        step_output = self._step_fn()
        self._zero_grad_fn()
        self._backward_fn(step_output["loss"])
        return step_output["loss"]

    def __call__(self):
        return self.closure()


class Trainer:
    def __init__(self, max_epochs=1):
        self.max_epochs = max_epochs

    def fit(self, model, train_dataloaders):
        optimizer = model.configure_optimizers()
        model.train()
        for epoch in range(self.max_epochs):
            for batch_idx, batch in enumerate(train_dataloaders):
                closure = Closure(
                    step_fn=lambda: model.training_step(batch, batch_idx),
                    backward_fn=lambda loss: loss.backward(),
                    zero_grad_fn=optimizer.zero_grad,
                )
                optimizer.step(closure=closure)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = BoringModel()
    train_data = DataLoader(RandomDataset(16), batch_size=4)
    before = model.layer.weight.detach().clone()

    trainer = Trainer(max_epochs=1)
    try:
        trainer.fit(model, train_dataloaders=train_data)
        raised = None
    except RuntimeError as e:
        raised = str(e)

    assert raised is not None and "does not require grad" in raised, raised
    assert torch.equal(before, model.layer.weight.detach())
    print("evidence holds: training_step ran inside AdamW.step's no_grad, backward raised:", raised.split("\n")[0])
