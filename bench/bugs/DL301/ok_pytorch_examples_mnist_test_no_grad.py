# source: https://github.com/pytorch/examples/blob/main/mnist/main.py
# category: DL301
# expect: clean
# evidence: test() runs after model.eval() inside `with torch.no_grad()`: no test output carries a graph, while train() still updates the weights
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 8, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(8 * 5 * 5, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        output = F.log_softmax(self.fc2(x), dim=1)
        return output


def train(args, model, device, train_loader, optimizer, epoch):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print('Train Epoch: {} [{}]\tLoss: {:.6f}'.format(epoch, batch_idx, loss.item()))


def test(model, device, test_loader):
    model.eval()
    test_loss = 0
    correct = 0
    outputs_seen = []
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction='sum').item()  # sum up batch loss
            pred = output.argmax(dim=1, keepdim=True)  # get the index of the max log-probability
            correct += pred.eq(target.view_as(pred)).sum().item()
            outputs_seen.append(output)
    test_loss /= sum(len(t) for _, t in test_loader)
    print('Test set: Average loss: {:.4f}, Accuracy: {}'.format(test_loss, correct))
    return outputs_seen


def main(args, train_loader, test_loader):
    device = torch.device("cpu")
    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    before = [p.detach().clone() for p in model.parameters()]
    outputs = []
    for epoch in range(1, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        outputs = test(model, device, test_loader)
        scheduler.step()
    return model, before, outputs


if __name__ == "__main__":
    torch.manual_seed(0)
    args = SimpleNamespace(lr=1.0, gamma=0.7, epochs=2, log_interval=2)
    train_loader = [(torch.randn(8, 1, 14, 14), torch.randint(0, 10, (8,))) for _ in range(4)]
    test_loader = [(torch.randn(8, 1, 14, 14), torch.randint(0, 10, (8,))) for _ in range(3)]
    model, before, outputs = main(args, train_loader, test_loader)
    assert len(outputs) == 3 and all(o.grad_fn is None and not o.requires_grad for o in outputs)
    assert any(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
    print("evidence holds: test outputs carry no graph; training changed the weights")
