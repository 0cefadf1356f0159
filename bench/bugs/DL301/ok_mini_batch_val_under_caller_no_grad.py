# source: https://github.com/dvgodoy/PyTorchStepByStep/issues/53
# category: DL301
# expect: clean
# evidence: the validation helper runs the model without its own no_grad, but the caller wraps mini_batch(device, val_loader, val_step_fn) in torch.no_grad(), so validation predictions have no grad_fn while training still updates the weights.
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset, random_split

torch.manual_seed(0)
np.random.seed(42)


def make_train_step_fn(model, loss_fn, optimizer):
    # Builds function that performs a step in the train loop
    def perform_train_step_fn(x, y):
        # Sets model to TRAIN mode
        model.train()
        # Step 1 - Computes our model's predicted output - forward pass
        yhat = model(x)
        # Step 2 - Computes the loss
        loss = loss_fn(yhat, y)
        # Step 3 - Computes gradients for both "a" and "b" parameters
        loss.backward()
        # Step 4 - Updates parameters using gradients and the learning rate
        optimizer.step()
        optimizer.zero_grad()
        # Returns the loss
        return loss.item()
    return perform_train_step_fn


def make_val_step_fn(model, loss_fn):
    # Builds function that performs a step in the validation loop
    def perform_val_step_fn(x, y):
        # Sets model to EVAL mode
        model.eval()
        # Step 1 - Computes our model's predicted output - forward pass
        yhat = model(x)
        # Step 2 - Computes the loss
        loss = loss_fn(yhat, y)
        # There is no need to compute Steps 3 and 4, since we don't update parameters during evaluation
        return loss.item()
    return perform_val_step_fn


def mini_batch(device, data_loader, step_fn):
    mini_batch_losses = []
    for x_batch, y_batch in data_loader:
        x_batch = x_batch.to(device)
        y_batch = y_batch.to(device)

        mini_batch_loss = step_fn(x_batch, y_batch)
        mini_batch_losses.append(mini_batch_loss)

    loss = np.mean(mini_batch_losses)
    return loss


# Data Generation / Preparation
true_b, true_w, N = 1, 2, 100
x = np.random.rand(N, 1)
y = true_b + true_w * x + (.1 * np.random.randn(N, 1))
x_tensor = torch.as_tensor(x).float()
y_tensor = torch.as_tensor(y).float()
dataset = TensorDataset(x_tensor, y_tensor)
n_train = int(len(dataset) * .8)
train_data, val_data = random_split(dataset, [n_train, N - n_train])
train_loader = DataLoader(dataset=train_data, batch_size=16, shuffle=True)
val_loader = DataLoader(dataset=val_data, batch_size=16)

# Model Configuration
device = 'cpu'
lr = 0.1
model = nn.Sequential(nn.Linear(1, 1)).to(device)
optimizer = optim.SGD(model.parameters(), lr=lr)
loss_fn = nn.MSELoss(reduction='mean')
train_step_fn = make_train_step_fn(model, loss_fn, optimizer)
val_step_fn = make_val_step_fn(model, loss_fn)

val_outputs = []
model[0].register_forward_hook(lambda m, i, o: None if m.training else val_outputs.append(o.grad_fn))
w_before = model[0].weight.detach().clone()

# Model Training
n_epochs = 20
losses = []
val_losses = []
for epoch in range(n_epochs):
    # inner loop
    loss = mini_batch(device, train_loader, train_step_fn)
    losses.append(loss)

    # VALIDATION
    # no gradients in validation!
    with torch.no_grad():
        val_loss = mini_batch(device, val_loader, val_step_fn)
        val_losses.append(val_loss)


if __name__ == "__main__":
    assert len(val_outputs) == n_epochs * 2 and all(fn is None for fn in val_outputs)
    assert not torch.equal(w_before, model[0].weight.detach())
    assert losses[-1] < losses[0]
    print("evidence holds: validation outputs have no grad_fn; training loss went",
          round(losses[0], 3), "->", round(losses[-1], 3))
