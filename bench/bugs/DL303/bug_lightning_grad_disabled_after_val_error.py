# source: https://github.com/Lightning-AI/pytorch-lightning/issues/2180
# category: DL303
# expect: flag 49, 68
# evidence: run_evaluation turns grad mode off globally and only turns it back on at its end; after an exception in validation_step the next fit() runs training_step with grad disabled, so loss.backward() raises and no weight changes.
import torch
import torch.nn as nn
import torch.nn.functional as F


class LitMNIST(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer_1 = nn.Linear(28 * 28, 32)
        self.layer_2 = nn.Linear(32, 10)
        self.broken_validation = True

    def forward(self, x):
        x = x.view(x.size(0), -1)
        x = F.relu(self.layer_1(x))
        return F.log_softmax(self.layer_2(x), dim=1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.nll_loss(logits, y)
        return {'loss': loss}

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.nll_loss(logits, y)
        if self.broken_validation:
            assert 1 == 2
        return {'val_loss': loss}

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


class Trainer:
    def __init__(self, max_epochs=1, num_sanity_val_steps=2):
        self.max_epochs = max_epochs
        self.num_sanity_val_steps = num_sanity_val_steps

    def run_evaluation(self, model, dataloader, max_batches):
        model.eval()

        # disable gradients to save memory
        torch.set_grad_enabled(False)

        outputs = []
        for batch_idx, batch in enumerate(dataloader):
            if batch_idx >= max_batches:
                break
            output = model.validation_step(batch, batch_idx)
            outputs.append(output['val_loss'].item())

        # enable gradients again
        torch.set_grad_enabled(True)
        model.train()
        return outputs

    def run_training_epoch(self, model, optimizer, dataloader):
        for batch_idx, batch in enumerate(dataloader):
            output = model.training_step(batch, batch_idx)
            loss = output['loss']
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    def fit(self, model, train_dataloader, val_dataloader):
        optimizer = model.configure_optimizers()
        model.train()
        for epoch in range(self.max_epochs):
            self.run_training_epoch(model, optimizer, train_dataloader)
            self.run_evaluation(model, val_dataloader, max_batches=len(val_dataloader))


if __name__ == "__main__":
    torch.manual_seed(0)
    train_loader = [(torch.randn(8, 1, 28, 28), torch.randint(0, 10, (8,))) for _ in range(3)]
    val_loader = [(torch.randn(8, 1, 28, 28), torch.randint(0, 10, (8,))) for _ in range(2)]
    model = LitMNIST()
    trainer = Trainer(max_epochs=1)

    # first cell run: validation_step fails
    try:
        trainer.fit(model, train_loader, val_loader)
    except AssertionError:
        pass

    # the user fixes validation_step and runs the cell again
    model.broken_validation = False
    before = [p.detach().clone() for p in model.parameters()]
    try:
        trainer.fit(model, train_loader, val_loader)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    grad_was_enabled = torch.is_grad_enabled()
    torch.set_grad_enabled(True)

    assert grad_was_enabled is False
    assert raised is not None and "does not require grad" in raised, raised
    assert all(torch.equal(b, p.detach()) for b, p in zip(before, model.parameters()))
    print("evidence holds: grad mode stayed off after the failed validation; the retried training step raised:", raised.split("\n")[0])
