# source: https://github.com/IntelLabs/distiller/issues/243
# category: DL102
# expect: flag 69
# evidence: StructureRemover thins conv1/conv2 with `param.data = torch.index_select(...)` at the end of a minibatch, while that step's graph is still alive; the next loss.backward() raises "ConvolutionBackward0 returned an invalid gradient at index 1 - got [8, 4, 3, 3] but expected shape compatible with [8, 8, 3, 3]"
from collections import namedtuple

import torch
import torch.nn as nn
import torch.nn.functional as F

ThinningRecipe = namedtuple('ThinningRecipe', ['modules', 'parameters'])


class SimpleCifarNet(nn.Module):
    def __init__(self):
        super(SimpleCifarNet, self).__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.conv2(x))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def append_param_directive(thinning_recipe, param_name, directive):
    thinning_recipe.parameters.setdefault(param_name, []).append(directive)


def append_module_directive(thinning_recipe, module_name, key, val):
    thinning_recipe.modules.setdefault(module_name, {})[key] = val


def append_bn_thinning_directive(thinning_recipe, bn_name, len_thin_features, thin_features):
    append_module_directive(thinning_recipe, bn_name, 'num_features', len_thin_features)
    append_module_directive(thinning_recipe, bn_name, 'running_mean', (0, thin_features))
    append_module_directive(thinning_recipe, bn_name, 'running_var', (0, thin_features))
    append_param_directive(thinning_recipe, bn_name + '.weight', (0, thin_features))
    append_param_directive(thinning_recipe, bn_name + '.bias', (0, thin_features))


def optimizer_thinning(optimizer, param, dim, indices):  # resize the SGD velocity buffers
    if optimizer is None or not isinstance(optimizer, torch.optim.SGD):
        return False
    param_state = optimizer.state.get(param, {})
    if 'momentum_buffer' in param_state:
        param_state['momentum_buffer'] = torch.index_select(param_state['momentum_buffer'], dim, indices)
    return 'momentum_buffer' in param_state


def execute_thinning_recipe(model, zeros_mask_dict, recipe, optimizer):
    layers = {mod_name: m for mod_name, m in model.named_modules()}
    for layer_name, directives in recipe.modules.items():
        for attr, val in directives.items():
            if attr in ['running_mean', 'running_var']:
                running = torch.index_select(getattr(layers[layer_name], attr), dim=val[0], index=val[1])
                setattr(layers[layer_name], attr, running)
            else:
                setattr(layers[layer_name], attr, val)

    params = dict(model.named_parameters())
    for param_name, param_directives in recipe.parameters.items():
        param = params[param_name]
        for dim, indices in param_directives:
            len_indices = indices.nelement()
            if param.size(dim) != len_indices:
                param.data = torch.index_select(param.data, dim, indices)
            if param.grad is not None and param.grad.size(dim) != len_indices:
                param.grad = torch.index_select(param.grad, dim, indices)
                optimizer_thinning(optimizer, param, dim, indices)


def remove_filters(model, zeros_mask_dict, optimizer=None):
    thinning_recipe = ThinningRecipe(modules={}, parameters={})
    weight = model.conv1.weight
    nonzero_filters = torch.nonzero(weight.detach().view(weight.size(0), -1).abs().sum(dim=1))
    if len(nonzero_filters) < weight.size(0):
        indices = nonzero_filters.squeeze(1)
        append_module_directive(thinning_recipe, 'conv1', 'out_channels', len(indices))
        append_param_directive(thinning_recipe, 'conv1.weight', (0, indices))
        append_module_directive(thinning_recipe, 'conv2', 'in_channels', len(indices))
        append_param_directive(thinning_recipe, 'conv2.weight', (1, indices))
        append_bn_thinning_directive(thinning_recipe, 'bn1', len(indices), indices)
        execute_thinning_recipe(model, zeros_mask_dict, thinning_recipe, optimizer)


class StructureRemover(object):
    def __init__(self, thinning_func, start_epoch, active_cb="on_minibatch_begin"):
        self.thinning_func = thinning_func
        self.start_epoch = start_epoch
        self.active_cb = active_cb
        self.done = False

    def __apply(self, model, epoch, zeros_mask_dict, optimizer):
        if epoch >= self.start_epoch and not self.done:
            self.thinning_func(model, zeros_mask_dict, optimizer=optimizer)
            self.done = True

    def on_minibatch_begin(self, model, epoch, minibatch_id, zeros_mask_dict, optimizer):
        if self.active_cb == "on_minibatch_begin":
            self.__apply(model, epoch, zeros_mask_dict, optimizer)

    def on_minibatch_end(self, model, epoch, minibatch_id, zeros_mask_dict, optimizer):
        if self.active_cb == "on_minibatch_end":
            self.__apply(model, epoch, zeros_mask_dict, optimizer)


class L1RankedFilterPruner(object):  # masks the 4 weakest conv1 filters around every step
    def __init__(self, start_epoch):
        self.start_epoch = start_epoch

    def on_minibatch_begin(self, model, epoch, minibatch_id, zeros_mask_dict, optimizer):
        if epoch >= self.start_epoch:
            with torch.no_grad():
                model.conv1.weight[4:] = 0

    on_minibatch_end = on_minibatch_begin


def train(train_loader, model, criterion, optimizer, epoch, policies, zeros_mask_dict):
    for train_step, (inputs, target) in enumerate(train_loader):
        for policy in policies:
            policy.on_minibatch_begin(model, epoch, train_step, zeros_mask_dict, optimizer)
        output = model(inputs)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        for policy in policies:
            policy.on_minibatch_end(model, epoch, train_step, zeros_mask_dict, optimizer)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = SimpleCifarNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    remover = StructureRemover(remove_filters, start_epoch=1, active_cb="on_minibatch_end")
    policies = [L1RankedFilterPruner(start_epoch=1), remover]
    loader = [(torch.randn(4, 3, 8, 8), torch.randint(0, 10, (4,))) for _ in range(2)]
    try:
        for epoch in range(2):
            train(loader, model, nn.CrossEntropyLoss(), optimizer, epoch, policies, {})
    except RuntimeError as err:
        assert "returned an invalid gradient at index 1 - got [8, 4, 3, 3] but expected shape compatible with [8, 8, 3, 3]" in str(err), str(err)
    else:
        raise AssertionError("backward should reject the gradient of the re-bound conv2 weight")
    assert remover.done and model.conv1.weight.shape == (4, 3, 3, 3) and model.conv2.weight.shape == (8, 4, 3, 3)
    print("evidence holds: after the mid-training param.data thinning, the next loss.backward() raises the invalid-gradient error")
