# source: https://github.com/pytorch/tutorials/blob/main/beginner_source/blitz/cifar10_tutorial.py
# category: DL402
# expect: clean
# evidence: imshow calls img.numpy() only on image batches from the loaders, which never require grad, so it works before and after training; the network trains and the accuracy loop runs under no_grad
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

shown = []


def make_grid(images, padding=2):
    padded = [F.pad(img, (padding, padding, padding, padding)) for img in images]
    return torch.cat(padded, dim=2)


def imshow(img):
    img = img / 2 + 0.5     # unnormalize
    npimg = img.numpy()
    shown.append(np.transpose(npimg, (1, 2, 0)))  # plt.imshow(...) in the tutorial


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def main(trainloader, testloader, classes):
    images, labels = next(iter(trainloader))
    imshow(make_grid(images))

    net = Net()
    criterion = nn.CrossEntropyLoss()
    optimizer = optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    w0 = net.fc3.weight.detach().clone()

    for epoch in range(2):
        running_loss = 0.0
        for i, data in enumerate(trainloader, 0):
            inputs, labels = data
            optimizer.zero_grad()
            outputs = net(inputs)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()

    images, labels = next(iter(testloader))
    imshow(make_grid(images))
    outputs = net(images)
    _, predicted = torch.max(outputs, 1)
    guesses = ' '.join(f'{classes[predicted[j]]:5s}' for j in range(4))

    correct = 0
    total = 0
    with torch.no_grad():
        for data in testloader:
            images, labels = data
            outputs = net(images)
            _, predicted = torch.max(outputs.data, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()
    return net, w0, guesses, correct / total


if __name__ == "__main__":
    torch.manual_seed(0)
    classes = ('plane', 'car', 'bird', 'cat', 'deer', 'dog', 'frog', 'horse', 'ship', 'truck')
    trainloader = [(torch.rand(4, 3, 32, 32) * 2 - 1, torch.randint(0, 10, (4,))) for _ in range(3)]
    testloader = [(torch.rand(4, 3, 32, 32) * 2 - 1, torch.randint(0, 10, (4,))) for _ in range(2)]

    net, w0, guesses, accuracy = main(trainloader, testloader, classes)

    assert len(shown) == 2 and shown[0].shape == (36, 144, 3)
    assert not torch.equal(w0, net.fc3.weight.detach())
    assert 0.0 <= accuracy <= 1.0 and len(guesses.split()) == 4
    print("evidence holds: .numpy() only ever sees loader images; training and the no_grad accuracy loop run")
