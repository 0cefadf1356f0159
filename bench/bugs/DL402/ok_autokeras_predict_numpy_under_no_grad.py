# source: https://github.com/keras-team/autokeras/blob/2c5d839746790a8046d56c27f6ff224e1eccb73c/autokeras/backend/torch/__init__.py
# category: DL402
# expect: clean
# evidence: predict() calls .numpy() directly on the model output of a trainable network, but inside `with torch.no_grad()` the output does not require grad, so the conversion succeeds.
from functools import reduce

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset


def produce_model(n_in=5, n_out=3):
    return torch.nn.Sequential(torch.nn.Linear(n_in, 16), torch.nn.ReLU(), torch.nn.Linear(16, n_out))


class ModelTrainer:
    def __init__(self, model, train_loader, loss_function, max_iter=3):
        self.model = model
        self.train_loader = train_loader
        self.loss_function = loss_function
        self.optimizer = torch.optim.Adam(model.parameters())
        self.max_iter = max_iter

    def train_model(self):
        for _ in range(self.max_iter):
            self.model.train()
            for inputs, targets in self.train_loader:
                self.optimizer.zero_grad()
                loss = self.loss_function(self.model(inputs), targets)
                loss.backward()
                self.optimizer.step()


def predict(torch_model, loader):
    outputs = []
    with torch.no_grad():
        for index, inputs in enumerate(loader):
            outputs.append(torch_model(inputs).numpy())
    output = reduce(lambda x, y: np.concatenate((x, y)), outputs)
    return output


if __name__ == "__main__":
    torch.manual_seed(0)
    x_train, y_train = torch.randn(12, 5), torch.randint(0, 3, (12,))
    train_loader = DataLoader(TensorDataset(x_train, y_train), batch_size=4)
    model = produce_model()
    ModelTrainer(model, train_loader, torch.nn.CrossEntropyLoss()).train_model()

    test_loader = DataLoader(torch.randn(10, 5), batch_size=4)
    result = predict(model, test_loader)
    assert isinstance(result, np.ndarray) and result.shape == (10, 3)
    assert all(p.requires_grad for p in model.parameters())
    print("evidence holds: predict() returned a %s numpy array from a trainable model without error" % (result.shape,))
