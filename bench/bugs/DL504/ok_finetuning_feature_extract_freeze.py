# source: https://github.com/pytorch/tutorials/blob/main/beginner_source/finetuning_torchvision_models_tutorial.py
# category: DL504
# expect: clean
# evidence: requires_grad = False is set on the backbone's parameters (leaves) before the new head is built: no error, only the head trains
import copy

import torch
import torch.nn as nn
import torch.optim as optim


class TinyResNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        return self.fc(self.avgpool(x).flatten(1))


def set_parameter_requires_grad(model, feature_extracting):
    if feature_extracting:
        for param in model.parameters():
            param.requires_grad = False


def initialize_model(num_classes, feature_extract):
    model_ft = TinyResNet()
    set_parameter_requires_grad(model_ft, feature_extract)
    num_ftrs = model_ft.fc.in_features
    model_ft.fc = nn.Linear(num_ftrs, num_classes)
    return model_ft


def train_model(model, dataloaders, criterion, optimizer, num_epochs=1):
    for epoch in range(num_epochs):
        model.train()
        for inputs, labels in dataloaders["train"]:
            optimizer.zero_grad()
            outputs = model(inputs)
            loss = criterion(outputs, labels)
            loss.backward()
            optimizer.step()
    return model


if __name__ == "__main__":
    torch.manual_seed(0)
    model_ft = initialize_model(num_classes=2, feature_extract=True)
    params_to_update = [param for name, param in model_ft.named_parameters() if param.requires_grad]
    optimizer_ft = optim.SGD(params_to_update, lr=0.01, momentum=0.9)
    conv_before = copy.deepcopy(model_ft.conv1.weight.detach())
    fc_before = copy.deepcopy(model_ft.fc.weight.detach())
    loader = {"train": [(torch.randn(4, 3, 8, 8), torch.randint(0, 2, (4,))) for _ in range(2)]}
    train_model(model_ft, loader, nn.CrossEntropyLoss(), optimizer_ft)
    assert len(params_to_update) == 2
    assert torch.equal(conv_before, model_ft.conv1.weight.detach())
    assert not torch.equal(fc_before, model_ft.fc.weight.detach())
    print("evidence holds: freezing leaf parameters works; the backbone stays fixed and the new head trains")
