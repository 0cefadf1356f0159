# source: https://github.com/rasbt/faster-pytorch-blog/issues/8
# category: DL303
# expect: clean
# evidence: training_step returns the loss of its first forward pass (with grad); the second forward under torch.no_grad() only feeds the accuracy metric, and the optimizer step moves the weights
import torch
import torch.nn as nn
import torch.nn.functional as F


class Accuracy:
    def __init__(self):
        self.correct, self.total = 0, 0

    def __call__(self, preds, target):
        self.correct += (preds == target).sum().item()
        self.total += target.numel()

    def compute(self):
        return self.correct / max(self.total, 1)


class LightningModel(nn.Module):
    def __init__(self, model, learning_rate):
        super().__init__()
        self.learning_rate = learning_rate
        self.model = model
        self.train_acc = Accuracy()
        self.logged = {}

    def forward(self, x):
        return self.model(x)

    def log(self, name, value, **kwargs):
        self.logged[name] = value

    def _shared_step(self, batch):
        features, true_labels = batch
        logits = self(features)
        loss = F.cross_entropy(logits, true_labels)
        predicted_labels = torch.argmax(logits, dim=1)
        return loss, true_labels, predicted_labels

    def training_step(self, batch, batch_idx):
        loss, true_labels, predicted_labels = self._shared_step(batch)
        self.log("train_loss", loss.item())

        # Do another forward pass in .eval() mode to compute accuracy
        # while accounting for Dropout, BatchNorm etc. behavior during evaluation
        self.model.eval()
        with torch.no_grad():
            _, true_labels, predicted_labels = self._shared_step(batch)
        self.train_acc(predicted_labels, true_labels)
        self.log("train_acc", self.train_acc.compute(), on_epoch=True, on_step=False)
        self.model.train()
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.learning_rate)


def fit(lightning_model, train_loader, max_epochs=2):
    optimizer = lightning_model.configure_optimizers()
    lightning_model.train()
    for _ in range(max_epochs):
        for batch_idx, batch in enumerate(train_loader):
            loss = lightning_model.training_step(batch, batch_idx)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    pytorch_model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 3))
    lightning_model = LightningModel(pytorch_model, learning_rate=1e-2)
    loader = [(torch.randn(16, 10), torch.randint(0, 3, (16,))) for _ in range(4)]
    w0 = pytorch_model[0].weight.detach().clone()

    first_loss = lightning_model.training_step(loader[0], 0)
    assert first_loss.grad_fn is not None  # the returned loss is from the grad-enabled pass
    assert lightning_model.model.training  # train mode restored after the eval pass

    fit(lightning_model, loader)
    assert not torch.equal(w0, pytorch_model[0].weight.detach())
    assert 0.0 <= lightning_model.logged["train_acc"] <= 1.0
    print("evidence holds: the no_grad pass only measures accuracy; the returned loss trains the model")
