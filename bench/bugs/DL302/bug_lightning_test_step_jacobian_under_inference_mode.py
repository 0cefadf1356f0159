# source: https://github.com/Lightning-AI/pytorch-lightning/issues/19910
# category: DL302
# expect: flag 47, 54, 86
# evidence: the Jacobian computed with torch.enable_grad() works in validation (run under no_grad) but raises "element 0 of tensors does not require grad" in test_step, which the loop runs under torch.inference_mode()
import torch
import torch.nn as nn
import torch.nn.functional as F


class LitModel(nn.Module):
    """A LightningModule-style model whose evaluation steps need input gradients."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 5))
        self.logged = {}

    def forward(self, x):
        return self.net(x)

    def log(self, name, value):
        self.logged[name] = float(value)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.mse_loss(self(x), y)
        self.log("train_loss", loss.item())
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        with torch.enable_grad():
            N = x.shape[1]
            f = lambda v: self(v) ** 2
            xg = x[0].clone().requires_grad_(True)
            out = f(xg)
            I_N = torch.eye(N)
            jacobian_rows = [
                torch.autograd.grad(out, xg, v, retain_graph=True, allow_unused=True)[0]
                for v in I_N.unbind()
            ]
            jacobian = torch.stack(jacobian_rows)
        self.log("val_jac_norm", jacobian.norm().item())

    def test_step(self, batch, batch_idx):
        x, y = batch
        with torch.enable_grad():
            N = x.shape[1]
            f = lambda v: self(v) ** 2
            xg = x[0].clone().requires_grad_(True)
            out = f(xg)
            I_N = torch.eye(N)
            jacobian_rows = [
                torch.autograd.grad(out, xg, v, retain_graph=True, allow_unused=True)[0]
                for v in I_N.unbind()
            ]
            jacobian = torch.stack(jacobian_rows)
        self.log("test_jac_norm", jacobian.norm().item())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Trainer:
    """The loop structure of the framework: grad on for fit, no_grad for validation, inference_mode for test."""

    def __init__(self, max_epochs=1):
        self.max_epochs = max_epochs

    def fit(self, model, train_dataloaders, val_dataloaders):
        optimizer = model.configure_optimizers()
        for _ in range(self.max_epochs):
            model.train()
            for batch_idx, batch in enumerate(train_dataloaders):
                loss = model.training_step(batch, batch_idx)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            model.eval()
            with torch.no_grad():
                for batch_idx, batch in enumerate(val_dataloaders):
                    model.validation_step(batch, batch_idx)

    def test(self, model, dataloaders):
        model.eval()
        with torch.inference_mode():
            for batch_idx, batch in enumerate(dataloaders):
                model.test_step(batch, batch_idx)


if __name__ == "__main__":
    torch.manual_seed(0)
    data = [(torch.randn(4, 5), torch.randn(4, 5)) for _ in range(2)]
    model = LitModel()
    trainer = Trainer(max_epochs=1)

    trainer.fit(model, train_dataloaders=data, val_dataloaders=data)
    assert model.logged["val_jac_norm"] > 0  # enable_grad re-enables recording under no_grad

    try:
        trainer.test(model, dataloaders=data)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised is not None and "element 0 of tensors does not require grad" in raised, raised
    assert "test_jac_norm" not in model.logged
    print("evidence holds: the same Jacobian works in validation and raises in test_step under inference_mode")
