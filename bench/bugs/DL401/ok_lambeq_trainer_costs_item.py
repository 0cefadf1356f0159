# source: https://github.com/Quantinuum/lambeq/pull/251
# category: DL401
# expect: clean
# evidence: the trainer records losses with loss.item() and validation runs under no_grad, so every list it keeps across iterations holds plain floats and no autograd graph survives a step.
from math import ceil

import torch
from torch import nn


class PytorchTrainer:
    def __init__(self, model, loss_function, optimizer, learning_rate, epochs, evaluate_functions=None,
                 device="cpu"):
        self.model = model
        self.loss_function = loss_function
        self.optimizer = optimizer(self.model.parameters(), lr=learning_rate)
        self.epochs = epochs
        self.evaluate_functions = evaluate_functions or {}
        self.device = torch.device(device)
        self.train_costs = []
        self.train_epoch_costs = []
        self.val_costs = []
        self.train_eval_results = {k: [] for k in self.evaluate_functions}
        self.val_eval_results = {k: [] for k in self.evaluate_functions}

    def validation_step(self, batch):
        x, y = batch
        with torch.no_grad():
            y_hat = self.model(x)
            loss = self.loss_function(y_hat, y.to(self.device))
        return y_hat, loss.item()

    def training_step(self, batch):
        x, y = batch
        y_hat = self.model(x)
        loss = self.loss_function(y_hat, y.to(self.device))
        self.train_costs.append(loss.item())
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return y_hat, loss.item()

    def fit(self, train_dataset, val_dataset=None):
        for epoch in range(self.epochs):
            train_loss = 0.0
            for batch in train_dataset:
                self.model.train()
                y_hat, loss = self.training_step(batch)
                train_loss += len(batch[0]) * loss
                for name, func in self.evaluate_functions.items():
                    self.train_eval_results[name].append(func(y_hat, batch[1]))
            self.train_epoch_costs.append(train_loss / sum(len(b[0]) for b in train_dataset))

            if val_dataset is not None:
                self.model.eval()
                val_loss = 0.0
                for v_batch in val_dataset:
                    y_hat, cur_loss = self.validation_step(v_batch)
                    val_loss += cur_loss * len(v_batch[0])
                    for name, func in self.evaluate_functions.items():
                        self.val_eval_results[name].append(func(y_hat, v_batch[1]))
                self.val_costs.append(val_loss / sum(len(b[0]) for b in val_dataset))


def accuracy(y_hat, y):
    return (torch.argmax(y_hat, dim=1) == torch.argmax(y, dim=1)).sum().item() / len(y)


if __name__ == "__main__":
    torch.manual_seed(0)

    def make_batches(n, bs=4):
        xs = torch.randn(n, 6)
        ys = torch.nn.functional.one_hot(torch.randint(0, 2, (n,)), 2).float()
        return [(xs[i:i + bs], ys[i:i + bs]) for i in range(0, n, bs)]

    model = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 2))
    trainer = PytorchTrainer(model=model, loss_function=nn.BCEWithLogitsLoss(), optimizer=torch.optim.AdamW,
                             learning_rate=3e-2, epochs=3, evaluate_functions={"acc": accuracy})
    w0 = model[0].weight.detach().clone()
    trainer.fit(make_batches(16), make_batches(8))

    stored = trainer.train_costs + trainer.train_epoch_costs + trainer.val_costs
    stored += trainer.train_eval_results["acc"] + trainer.val_eval_results["acc"]
    assert len(trainer.train_costs) == 3 * ceil(16 / 4)
    assert all(isinstance(v, float) for v in stored), [type(v) for v in stored]
    assert not torch.equal(w0, model[0].weight)
    print("evidence holds: %d logged values are Python floats (no tensors, no graphs) and the model trained"
          % len(stored))
