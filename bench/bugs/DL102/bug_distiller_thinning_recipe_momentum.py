# source: https://github.com/IntelLabs/distiller/pull/6
# category: DL102
# expect: flag 67
# evidence: after the epoch-end channel thinning re-binds param.data to the thinned tensors mid-training, the next optimizer.step() raises "The size of tensor a (8) must match the size of tensor b (4)" on the stale SGD momentum buffers; with momentum=0 the same run steps fine
from collections import namedtuple

import torch
import torch.nn as nn
import torch.nn.functional as F

ThinningRecipe = namedtuple('ThinningRecipe', ['modules', 'parameters'])

# layer_name : follower (the conv that reads its output channels)
conv_connectivity = {'layer1.0.conv1': 'layer1.0.conv2'}


class BasicBlock(nn.Module):
    def __init__(self, planes=8):
        super(BasicBlock, self).__init__()
        self.conv1 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + x)


class ResNetCifar(nn.Module):
    def __init__(self, num_classes=10):
        super(ResNetCifar, self).__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.layer1 = nn.Sequential(BasicBlock(8))
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer1(x)
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def bn_thinning(thinning_recipe, bn_name, len_thin_features, thin_features):
    bn_directive = thinning_recipe.modules.get(bn_name, {})
    bn_directive['num_features'] = len_thin_features
    bn_directive['running_mean'] = (0, thin_features)
    bn_directive['running_var'] = (0, thin_features)
    thinning_recipe.modules[bn_name] = bn_directive
    thinning_recipe.parameters[bn_name + '.weight'] = (0, thin_features)
    thinning_recipe.parameters[bn_name + '.bias'] = (0, thin_features)


def execute_thinning_recipe(model, zeros_mask_dict, recipe):
    layers = {name: m for name, m in model.named_modules()}
    for layer_name, directives in recipe.modules.items():
        for attr, val in directives.items():
            if attr in ['running_mean', 'running_var']:
                setattr(layers[layer_name], attr,
                        torch.index_select(getattr(layers[layer_name], attr), dim=val[0], index=val[1]))
            else:
                setattr(layers[layer_name], attr, val)
    params = dict(model.named_parameters())
    for param_name, info in recipe.parameters.items():
        param = params[param_name]
        param.data = torch.index_select(param.data, dim=info[0], index=info[1])
    model.thinning_recipe = recipe
    return model


def find_predecessors(layer_name):
    return [layer for layer, follower in conv_connectivity.items() if follower == layer_name]


def resnet_cifar_remove_channels(model, zeros_mask_dict):
    recipe = ThinningRecipe(modules={}, parameters={})
    for name, p_thin in model.named_parameters():
        if p_thin.dim() != 4:
            continue
        num_filters, num_channels = p_thin.size(0), p_thin.size(1)
        kernel_sums = p_thin.detach().view(-1, p_thin.size(2) * p_thin.size(3)).abs().sum(dim=1)
        k_sums_mat = kernel_sums.view(num_filters, num_channels).t()
        nonzero_channels = torch.nonzero(k_sums_mat.abs().sum(dim=1))
        if num_channels > len(nonzero_channels):
            layer_name = name[:-len('.weight')]
            indices = nonzero_channels.squeeze(1)
            recipe.modules[layer_name] = {'in_channels': len(indices)}
            recipe.parameters[name] = (1, indices)
            for predecessor in find_predecessors(layer_name):
                recipe.modules[predecessor] = {'out_channels': len(indices)}
                recipe.parameters[predecessor + '.weight'] = (0, indices)
                bn_thinning(recipe, predecessor.replace('conv', 'bn'), len(indices), indices)
    if len(recipe.modules) > 0 or len(recipe.parameters) > 0:
        execute_thinning_recipe(model, zeros_mask_dict, recipe)
    return model


class ResnetCifarChannelRemover(object):
    """A policy which applies a network thinning function"""
    def __init__(self, thinning_func):
        self.thinning_func = thinning_func

    def on_epoch_end(self, model, zeros_mask_dict, meta):
        self.thinning_func(model, zeros_mask_dict)


class ChannelPruner(object):
    """An L1-ranked structure pruner: zeroes the weakest input channels of conv2"""
    def on_epoch_end(self, model, zeros_mask_dict, meta):
        with torch.no_grad():
            model.layer1[0].conv2.weight[:, 4:] = 0


def train(train_loader, model, criterion, optimizer, epoch):
    losses = []
    for train_step, (inputs, target) in enumerate(train_loader):
        output = model(inputs)
        loss = criterion(output, target)
        losses.append(loss.item())  # only the number is kept
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return sum(losses) / len(losses)


def run(momentum):
    torch.manual_seed(0)
    model = ResNetCifar()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=momentum)
    policies = [ChannelPruner(), ResnetCifarChannelRemover(resnet_cifar_remove_channels)]
    loader = [(torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))) for _ in range(2)]
    for epoch in range(2):
        loss = train(loader, model, nn.CrossEntropyLoss(), optimizer, epoch)
        for policy in policies:
            policy.on_epoch_end(model, {}, None)
    return model, loss


if __name__ == "__main__":
    try:
        run(momentum=0.9)
    except RuntimeError as err:
        assert "The size of tensor a (8) must match the size of tensor b (4)" in str(err), str(err)
    else:
        raise AssertionError("SGD momentum buffers should not fit the thinned weights")
    model, loss = run(momentum=0.0)
    assert model.layer1[0].conv1.weight.shape == (4, 8, 3, 3) and model.layer1[0].conv2.weight.shape == (8, 4, 3, 3)
    print("evidence holds: after the param.data re-bind the momentum SGD step raises the size-mismatch error; momentum=0 trains on")
