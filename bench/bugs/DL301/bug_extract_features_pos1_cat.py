# source: https://discuss.pytorch.org/t/why-extracting-features-from-pictures-is-memory-demanding/5836
# category: DL301
# expect: flag 52, 53, 54
# evidence: after the module-level feature-extraction loop, pos1 still carries a grad_fn whose graph holds every picture's forward pass (one conv backward node per picture).
import io
import os

import torch
from torch import nn
from torch.autograd import Variable

torch.manual_seed(0)


class DATASET(torch.utils.data.Dataset):
    """Stand-in for the poster's dataset: returns (picture, label) pairs."""

    def __init__(self, root, n=12):
        self.root = root
        self.imgs = torch.randn(n, 3, 32, 32)

    def __getitem__(self, index):
        return self.imgs[index], 0

    def __len__(self):
        return len(self.imgs)


class ResNetLike(nn.Module):
    """Tiny stand-in for torchvision.models.resnet152(pretrained=True)."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.relu = nn.ReLU()
        self.layer1 = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        x = self.relu(self.conv1(x))
        x = self.layer1(x)
        x = self.avgpool(x)
        return self.fc(torch.flatten(x, 1))


mydata = DATASET(os.getcwd())
model = ResNetLike()
new_classifier = nn.Sequential(*list(model.children())[:-1])
model.classifier = new_classifier

pos1 = model(Variable(mydata[0][0].view(1, 3, 32, 32)))
for index in range(1, len(mydata)):
    f = model(Variable(mydata[index][0].view(1, 3, 32, 32)))
    pos1 = torch.cat((pos1, f))

with io.BytesIO() as f:
    torch.save(pos1, f)


def count_nodes(fn, name):
    seen, stack, count = set(), [fn], 0
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if type(node).__name__ == name:
            count += 1
        stack.extend(nxt for nxt, _ in node.next_functions)
    return count


if __name__ == "__main__":
    assert pos1.requires_grad and pos1.grad_fn is not None
    n_conv = count_nodes(pos1.grad_fn, "ConvolutionBackward0")
    # two convolutions per picture are all still referenced by pos1's graph
    assert n_conv == 2 * len(mydata), n_conv
    print("evidence holds: pos1 keeps", n_conv, "conv backward nodes alive for", len(mydata), "pictures")
