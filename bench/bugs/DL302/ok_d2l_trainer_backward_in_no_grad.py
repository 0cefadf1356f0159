# source: https://github.com/d2l-ai/d2l-en/issues/2573
# category: DL302
# expect: clean
# evidence: loss.backward() inside the no_grad block still fills the gradients (the loss was built with grad on), so fit() lowers the training loss and moves the weights
import torch
from torch import nn


class HyperParameters:
    def save_hyperparameters(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)


class Module(nn.Module, HyperParameters):
    """Base class of models: the loss, the steps and the optimizer live on the model."""

    def __init__(self):
        super().__init__()
        self.train_losses, self.val_losses = [], []

    def loss(self, y_hat, y):
        return ((y_hat - y) ** 2 / 2).mean()

    def forward(self, X):
        return self.net(X)

    def training_step(self, batch):
        l = self.loss(self(*batch[:-1]), batch[-1])
        self.train_losses.append(l.item())
        return l

    def validation_step(self, batch):
        l = self.loss(self(*batch[:-1]), batch[-1])
        self.val_losses.append(l.item())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), self.lr)


class LinearRegression(Module):
    def __init__(self, lr):
        super().__init__()
        self.save_hyperparameters(lr=lr)
        self.net = nn.LazyLinear(1)
        self.net.weight.data.normal_(0, 0.01)
        self.net.bias.data.fill_(0)


class Trainer(HyperParameters):
    def __init__(self, max_epochs, gradient_clip_val=0):
        self.save_hyperparameters(max_epochs=max_epochs, gradient_clip_val=gradient_clip_val)

    def prepare_data(self, data):
        self.train_dataloader, self.val_dataloader = data

    def prepare_model(self, model):
        model.trainer = self
        self.model = model

    def prepare_batch(self, batch):
        return batch

    def fit(self, model, data):
        self.prepare_data(data)
        self.prepare_model(model)
        self.optim = model.configure_optimizers()
        self.epoch = 0
        self.train_batch_idx = 0
        self.val_batch_idx = 0
        for self.epoch in range(self.max_epochs):
            self.fit_epoch()

    def clip_gradients(self, grad_clip_val, model):
        params = [p for p in model.parameters() if p.requires_grad]
        norm = torch.sqrt(sum(torch.sum((p.grad ** 2)) for p in params))
        if norm > grad_clip_val:
            for param in params:
                param.grad[:] *= grad_clip_val / norm

    def fit_epoch(self):
        self.model.train()
        for batch in self.train_dataloader:
            loss = self.model.training_step(self.prepare_batch(batch))
            self.optim.zero_grad()
            with torch.no_grad():
                loss.backward()
                if self.gradient_clip_val > 0:
                    self.clip_gradients(self.gradient_clip_val, self.model)
                self.optim.step()
            self.train_batch_idx += 1
        if self.val_dataloader is None:
            return
        self.model.eval()
        for batch in self.val_dataloader:
            with torch.no_grad():
                self.model.validation_step(self.prepare_batch(batch))
            self.val_batch_idx += 1


def synthetic_data(w, b, num_examples, batch_size):
    X = torch.randn(num_examples, len(w))
    y = X @ w.reshape(-1, 1) + b + 0.01 * torch.randn(num_examples, 1)
    return [(X[i:i + batch_size], y[i:i + batch_size]) for i in range(0, num_examples, batch_size)]


if __name__ == "__main__":
    torch.manual_seed(0)
    w, b = torch.tensor([2.0, -3.4]), 4.2
    train = synthetic_data(w, b, 64, 8)
    val = synthetic_data(w, b, 16, 8)
    model = LinearRegression(lr=0.03)
    model(train[0][0])  # materialize the lazy layer
    w0 = model.net.weight.detach().clone()

    trainer = Trainer(max_epochs=10, gradient_clip_val=10.0)
    trainer.fit(model, (train, val))

    assert not torch.equal(w0, model.net.weight.detach())
    assert model.train_losses[-1] < model.train_losses[0] / 4
    assert (model.net.weight.detach() - w).abs().max() < 1.0
    print("evidence holds: backward inside no_grad computes gradients; the regression weights approach the true ones")
