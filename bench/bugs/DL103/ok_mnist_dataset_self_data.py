# source: https://github.com/pytorch/vision/blob/main/torchvision/datasets/mnist.py
# category: DL103
# expect: clean
# evidence: self.data is the dataset's image store, not Tensor.data: samples come out as float images, the model trains on them and the store is never part of a graph
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class MNIST(Dataset):
    """Same storage layout as torchvision's MNIST: uint8 images in self.data, labels in self.targets."""

    def __init__(self, n=16, transform=None):
        g = torch.Generator().manual_seed(0)
        self.data = torch.randint(0, 256, (n, 28, 28), dtype=torch.uint8, generator=g)
        self.targets = torch.randint(0, 10, (n,), generator=g)
        self.transform = transform

    def __getitem__(self, index):
        img, target = self.data[index], int(self.targets[index])
        img = img.float().div(255).unsqueeze(0)
        if self.transform is not None:
            img = self.transform(img)
        return img, target

    def __len__(self):
        return len(self.data)


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 2)
        self.fc1 = nn.Linear(4 * 13 * 13, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        return F.log_softmax(self.fc1(torch.flatten(x, 1)), dim=1)


def train(model, train_loader, optimizer):
    model.train()
    for data, target in train_loader:
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
    return loss.item()


if __name__ == "__main__":
    torch.manual_seed(0)
    dataset = MNIST(transform=lambda t: (t - 0.1307) / 0.3081)
    mean = dataset.data.float().mean() / 255
    train_loader = DataLoader(dataset, batch_size=4, shuffle=True)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = [p.detach().clone() for p in model.parameters()]
    train(model, train_loader, optimizer)
    assert 0.3 < mean.item() < 0.7
    assert dataset.data.dtype == torch.uint8 and not dataset.data.requires_grad
    assert all(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
    print("evidence holds: dataset.data is plain image storage; the model trains on the samples it yields")
