# source: https://github.com/marrrcin/pytorch-resnet-mnist/issues/2
# category: DL601
# expect: clean
# evidence: the loop clears gradients with model.zero_grad() instead of optimizer.zero_grad(); since the optimizer holds exactly model.parameters(), every step uses only the current batch's gradient.
import copy

import torch
import torch.nn as nn


class MnistResNet(nn.Module):
    def __init__(self):
        super(MnistResNet, self).__init__()
        self.conv1 = nn.Conv2d(1, 8, kernel_size=3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.relu(x + self.layer1(x))
        x = torch.flatten(self.avgpool(x), 1)
        return torch.softmax(self.fc(x), dim=-1)


def tqdm(iterable, desc=None, total=None):
    class _P:
        def __iter__(self_inner):
            return iter(iterable)

        def set_description(self_inner, d):
            pass
    return _P()


if __name__ == "__main__":
    torch.manual_seed(0)
    device = torch.device("cpu")
    model = MnistResNet().to(device)
    epochs = 1
    train_loader = [(torch.randn(4, 1, 28, 28), torch.randint(0, 10, (4,))) for _ in range(3)]
    batches = len(train_loader)
    loss_function = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adadelta(model.parameters())

    snapshots = []
    real_step = optimizer.step

    def recording_step(*a, **k):
        snapshots.append((copy.deepcopy(model.state_dict()), model.fc.weight.grad.detach().clone()))
        return real_step(*a, **k)

    optimizer.step = recording_step

    for epoch in range(epochs):
        total_loss = 0

        # progress bar (works in Jupyter notebook too!)
        progress = tqdm(enumerate(train_loader), desc="Loss: ", total=batches)

        # ----------------- TRAINING  --------------------
        # set model to training
        model.train()

        for i, data in progress:
            X, y = data[0].to(device), data[1].to(device)

            # training step for single batch
            model.zero_grad()
            outputs = model(X)
            loss = loss_function(outputs, y)
            loss.backward()
            optimizer.step()

            # getting training quality data
            current_loss = loss.item()
            total_loss += current_loss

            # updating progress bar
            progress.set_description("Loss: {:.4f}".format(total_loss / (i + 1)))

    for (state, used_grad), (X, y) in zip(snapshots, train_loader):
        probe = MnistResNet()
        probe.load_state_dict(state)
        probe.train()
        fresh = torch.autograd.grad(loss_function(probe(X), y), probe.fc.weight)[0]
        assert torch.allclose(used_grad, fresh, atol=1e-6)
    print("evidence holds: each of the 3 steps used exactly its own batch gradient; model.zero_grad() cleared the optimizer's parameters")
