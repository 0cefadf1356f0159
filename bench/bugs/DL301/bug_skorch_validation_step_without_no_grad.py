# source: https://github.com/skorch-dev/skorch/issues/218
# category: DL301
# expect: flag 48, 67, 68
# evidence: fit_loop's validation batches go through validation_step -> infer -> module_ after module_.eval() with grad enabled: each step's y_pred and loss carry a grad_fn, and the step dict handed to callbacks keeps the graph alive
import numpy as np
import torch
from torch import nn


class NeuralNet(object):
    def __init__(self, module, criterion, optimizer=torch.optim.SGD, lr=0.01, max_epochs=2, batch_size=4):
        self.module = module
        self.criterion = criterion
        self.optimizer = optimizer
        self.lr = lr
        self.max_epochs = max_epochs
        self.batch_size = batch_size
        self.history = []
        self.callbacks = []

    def initialize(self):
        self.module_ = self.module()
        self.criterion_ = self.criterion()
        self.optimizer_ = self.optimizer(self.module_.parameters(), lr=self.lr)
        return self

    def notify(self, method_name, **cb_kwargs):
        for cb in self.callbacks:
            getattr(cb, method_name)(self, **cb_kwargs)

    def infer(self, x, **fit_params):
        return self.module_(x, **fit_params)

    def get_loss(self, y_pred, y_true, X=None, training=False):
        return self.criterion_(y_pred, y_true)

    def train_step(self, Xi, yi, **fit_params):
        self.module_.train()
        self.optimizer_.zero_grad()
        y_pred = self.infer(Xi, **fit_params)
        loss = self.get_loss(y_pred, yi, X=Xi, training=True)
        loss.backward()
        self.optimizer_.step()
        return {'loss': loss, 'y_pred': y_pred}

    def validation_step(self, Xi, yi, **fit_params):
        self.module_.eval()
        y_pred = self.infer(Xi, **fit_params)
        loss = self.get_loss(y_pred, yi, X=Xi, training=False)
        return {'loss': loss, 'y_pred': y_pred}

    def get_iterator(self, dataset, training=False):
        X, y = dataset
        for i in range(0, len(X), self.batch_size):
            yield X[i:i + self.batch_size], y[i:i + self.batch_size]

    def fit_loop(self, X, y, X_valid, y_valid, **fit_params):
        for epoch in range(self.max_epochs):
            self.notify('on_epoch_begin')
            train_losses = []
            for Xi, yi in self.get_iterator((X, y), training=True):
                step = self.train_step(Xi, yi, **fit_params)
                train_losses.append(step['loss'].item())
                self.notify('on_batch_end', X=Xi, y=yi, training=True, **step)

            valid_losses = []
            for Xi, yi in self.get_iterator((X_valid, y_valid), training=False):
                step = self.validation_step(Xi, yi, **fit_params)
                valid_losses.append(step['loss'].item())
                self.notify('on_batch_end', X=Xi, y=yi, training=False, **step)

            self.history.append({'train_loss': np.mean(train_losses), 'valid_loss': np.mean(valid_losses)})
            self.notify('on_epoch_end')
        return self


class PointNetish(nn.Module):
    def __init__(self, num_points=16, num_classes=3):
        super().__init__()
        self.feat = nn.Sequential(nn.Conv1d(3, 16, 1), nn.ReLU(), nn.Conv1d(16, 32, 1), nn.ReLU())
        self.head = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.head(self.feat(x).max(dim=2)[0])


class StepRecorder(object):
    """Callback that keeps what the net hands over at the end of each batch."""

    def __init__(self):
        self.valid_steps = []

    def on_epoch_begin(self, net):
        pass

    def on_epoch_end(self, net):
        pass

    def on_batch_end(self, net, X=None, y=None, training=None, **step):
        if not training:
            self.valid_steps.append(step)


if __name__ == "__main__":
    torch.manual_seed(0)
    X, y = torch.randn(8, 3, 16), torch.randint(0, 3, (8,))
    X_valid, y_valid = torch.randn(8, 3, 16), torch.randint(0, 3, (8,))
    net = NeuralNet(PointNetish, nn.CrossEntropyLoss).initialize()
    recorder = StepRecorder()
    net.callbacks.append(recorder)
    net.fit_loop(X, y, X_valid, y_valid)
    assert len(recorder.valid_steps) == 4
    assert all(s['y_pred'].grad_fn is not None and s['loss'].grad_fn is not None for s in recorder.valid_steps)
    grads = torch.autograd.grad(recorder.valid_steps[-1]['loss'], net.module_.head.weight)
    assert grads[0].abs().sum() > 0
    print("evidence holds: all %d validation steps return y_pred/loss with grad_fns reaching the module's weights"
          % len(recorder.valid_steps))
