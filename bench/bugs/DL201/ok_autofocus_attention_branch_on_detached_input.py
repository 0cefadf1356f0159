# source: https://github.com/yaq007/Autofocus-Layer/issues/6
# category: DL201
# expect: clean
# evidence: after one step the attention convs (convatt1, convatt2) and the dilated main-branch conv all receive gradients and change
import torch
import torch.nn as nn
import torch.nn.functional as F


class Autofocus(nn.Module):
    def __init__(self, inplanes, outplanes, dilations=(2, 4, 6)):
        super().__init__()
        self.dilations = dilations
        self.num_branches = len(dilations)
        self.conv1 = nn.Conv3d(inplanes, outplanes, kernel_size=3, dilation=dilations[0], padding=dilations[0], bias=False)
        self.bn_list1 = nn.ModuleList([nn.BatchNorm3d(outplanes) for _ in range(self.num_branches)])
        self.convatt11 = nn.Conv3d(inplanes, inplanes // 2, kernel_size=3, padding=1)
        self.convatt12 = nn.Conv3d(inplanes // 2, self.num_branches, kernel_size=1)
        self.relu = nn.ReLU()

    def forward(self, x):
        # compute the attention map on the detached input: the attention
        # branch should not reshape the main branch's features
        feature = x.detach()
        att = self.relu(self.convatt11(feature))
        att = self.convatt12(att)
        att = F.softmax(att, dim=1)

        x1 = self.conv1(x)
        shape = x1.size()
        out = self.bn_list1[0](x1) * att[:, 0:1].expand(shape)
        for i in range(1, self.num_branches):
            x1 = F.conv3d(x, self.conv1.weight, padding=self.dilations[i], dilation=self.dilations[i])
            out = out + self.bn_list1[i](x1) * att[:, i:i + 1].expand(shape)
        return self.relu(out)


class ModelBlock(nn.Module):
    def __init__(self, in_channels=4, num_classes=3):
        super().__init__()
        self.conv0 = nn.Conv3d(in_channels, 8, kernel_size=3, padding=1)
        self.af = Autofocus(8, 8)
        self.classifier = nn.Conv3d(8, num_classes, kernel_size=1)

    def forward(self, x):
        return self.classifier(self.af(F.relu(self.conv0(x))))


def train(model, optimizer, criterion, loader):
    model.train()
    for volume, label in loader:
        output = model(volume)
        loss = criterion(output, label)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = ModelBlock()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = [(torch.randn(2, 4, 6, 6, 6), torch.randint(0, 3, (2, 6, 6, 6)))]
    att_before = model.af.convatt11.weight.detach().clone()
    conv0_before = model.conv0.weight.detach().clone()
    train(model, optimizer, nn.CrossEntropyLoss(), loader)
    assert model.af.convatt11.weight.grad is not None and model.af.convatt12.weight.grad is not None
    assert not torch.equal(att_before, model.af.convatt11.weight)
    assert not torch.equal(conv0_before, model.conv0.weight)
    print("evidence holds: the attention branch trains through its softmax weights; the detach only stops it feeding back into conv0")
