# source: https://php.bkmy88.com/faq/1835025.html
# category: DL203
# expect: flag 41, 46
# evidence: the loss is computed from softmax(...).argmax(dim=1) cast to float, which has no grad_fn, so loss.backward() raises "element 0 of tensors does not require grad and does not have a grad_fn".
import torch
import torch.nn as nn

torch.manual_seed(0)


class MultiClassModel(nn.Module):
    def __init__(self, in_features=2, out_features=4, hidden_units=8):
        super().__init__()
        self.linear_layer_stack = nn.Sequential(
            nn.Linear(in_features, hidden_units), nn.ReLU(),
            nn.Linear(hidden_units, hidden_units), nn.ReLU(),
            nn.Linear(hidden_units, out_features),
        )

    def forward(self, x):
        return self.linear_layer_stack(x)


def accuracy(y_true, y_pred):
    correct = torch.eq(y_true, y_pred).sum().item()
    return (correct / len(y_pred)) * 100


X_train = torch.randn(32, 2)
y_train = torch.randint(0, 4, (32,)).type(torch.float32)
model = MultiClassModel()
loss_fn = nn.MSELoss()
optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
Epochs = 3


def train():
    for epoch in range(Epochs):
        model.train()
        train_logits = model(X_train)
        train_preds_probs = torch.softmax(train_logits, dim=1).argmax(dim=1).type(torch.float32)
        loss = loss_fn(train_preds_probs, y_train)
        train_accu = accuracy(y_train, train_preds_probs)
        print(train_preds_probs)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()


if __name__ == "__main__":
    try:
        train()
    except RuntimeError as e:
        assert "does not require grad and does not have a grad_fn" in str(e), str(e)
        print("evidence holds: loss.backward() raised 'element 0 of tensors does not require grad'")
    else:
        raise AssertionError("backward did not raise")
