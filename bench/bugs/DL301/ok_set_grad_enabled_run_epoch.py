# source: https://runebook.dev/ru/docs/pytorch/generated/torch.autograd.grad_mode.set_grad_enabled
# category: DL301
# expect: clean
# evidence: run_epoch wraps both passes in torch.set_grad_enabled(is_train), so the validation call (is_train=False) builds no graph (outputs have no grad_fn) while the training call still updates the weights.
import torch
import torch.nn as nn

torch.manual_seed(0)

model = nn.Linear(5, 1)
data = torch.randn(10, 5)
target = torch.randn(10, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.MSELoss()


def run_epoch(model, data, is_train):
    # If is_train=True gradients are on, if False they are off.
    model.train(is_train)
    with torch.set_grad_enabled(is_train):
        output = model(data)
        loss = criterion(output, target)
        if is_train:
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return output, loss


if __name__ == "__main__":
    before = model.weight.detach().clone()
    for epoch in range(3):
        train_out, train_loss = run_epoch(model, data, is_train=True)
        val_out, val_loss = run_epoch(model, data, is_train=False)
        assert val_out.grad_fn is None and not val_out.requires_grad
        assert val_loss.grad_fn is None
    assert train_out.grad_fn is not None
    with torch.no_grad():
        assert not torch.equal(before, model.weight)
    print("evidence holds: validation outputs carry no graph, training still changes the weights")
