# source: https://github.com/AMLab-Amsterdam/L0_regularization/issues/4
# category: DL103
# expect: flag 170, 171
# evidence: the first iteration of train() raises IndexError "invalid index of a 0-dim tensor" at losses.update(loss.data[0], ...), before any optimizer step.
"""
train_lenet5.py train() with utils.AverageMeter/accuracy and l0_layers.L0Dense; the network is
models.L0MLP shrunk (the expected-FLOPs logging and tensorboard are left out).
"""
import argparse
import math
import time
from copy import deepcopy

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import init
from torch.nn.modules import Module
from torch.nn.parameter import Parameter

limit_a, limit_b, epsilon = -.1, 1.1, 1e-6


class AverageMeter(object):
    """Computes and stores the average and current value"""
    def __init__(self):
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def accuracy(output, target, topk=(1,)):
    """Computes the precision@k for the specified values of k"""
    maxk = max(topk)
    batch_size = target.size(0)
    _, pred = output.topk(maxk, 1, True, True)
    pred = pred.t()
    correct = pred.eq(target.view(1, -1).expand_as(pred))
    res = []
    for k in topk:
        correct_k = correct[:k].reshape(-1).float().sum(0)
        res.append(correct_k.mul_(100.0 / batch_size))
    return res


class L0Dense(Module):
    """Implementation of L0 regularization for the input units of a fully connected layer"""
    def __init__(self, in_features, out_features, bias=True, weight_decay=1., droprate_init=0.5,
                 temperature=2. / 3., lamba=1., local_rep=False, **kwargs):
        super(L0Dense, self).__init__()
        self.in_features, self.out_features = in_features, out_features
        self.prior_prec = weight_decay
        self.weights = Parameter(torch.Tensor(in_features, out_features))
        self.qz_loga = Parameter(torch.Tensor(in_features))
        self.temperature = temperature
        self.droprate_init = droprate_init if droprate_init != 0. else 0.5
        self.lamba = lamba
        self.local_rep = local_rep
        self.bias = Parameter(torch.Tensor(out_features))
        self.use_bias = True
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_normal_(self.weights, mode='fan_out')
        self.qz_loga.data.normal_(math.log(1 - self.droprate_init) - math.log(self.droprate_init), 1e-2)
        self.bias.data.fill_(0)

    def constrain_parameters(self, **kwargs):
        self.qz_loga.data.clamp_(min=math.log(1e-2), max=math.log(1e2))

    def cdf_qz(self, x):
        xn = (x - limit_a) / (limit_b - limit_a)
        logits = math.log(xn) - math.log(1 - xn)
        return torch.sigmoid(logits * self.temperature - self.qz_loga).clamp(min=epsilon, max=1 - epsilon)

    def quantile_concrete(self, x):
        y = torch.sigmoid((torch.log(x) - torch.log(1 - x) + self.qz_loga) / self.temperature)
        return y * (limit_b - limit_a) + limit_a

    def _reg_w(self):
        logpw_col = torch.sum(- (.5 * self.prior_prec * self.weights.pow(2)) - self.lamba, 1)
        logpw = torch.sum((1 - self.cdf_qz(0)) * logpw_col)
        logpb = - torch.sum(.5 * self.prior_prec * self.bias.pow(2))
        return logpw + logpb

    def regularization(self):
        return self._reg_w()

    def get_eps(self, size):
        return torch.empty(size).uniform_(epsilon, 1 - epsilon)

    def sample_weights(self):
        z = self.quantile_concrete(self.get_eps(self.in_features))
        mask = F.hardtanh(z, min_val=0, max_val=1)
        return mask.view(self.in_features, 1) * self.weights

    def forward(self, input):
        weights = self.sample_weights()
        output = input.mm(weights)
        output.add_(self.bias)
        return output


class L0MLP(nn.Module):
    def __init__(self, input_dim, num_classes, layer_dims=(300, 100), N=50000, beta_ema=0.999,
                 weight_decay=1, lambas=(1., 1., 1.), local_rep=False, temperature=2. / 3.):
        super(L0MLP, self).__init__()
        self.layer_dims, self.input_dim, self.N, self.beta_ema = layer_dims, input_dim, N, beta_ema
        self.weight_decay = self.N * weight_decay
        layers = []
        for i, dimh in enumerate(self.layer_dims):
            inp_dim = self.input_dim if i == 0 else self.layer_dims[i - 1]
            droprate_init, lamba = 0.2 if i == 0 else 0.5, lambas[i] if len(lambas) > 1 else lambas[0]
            layers += [L0Dense(inp_dim, dimh, droprate_init=droprate_init, weight_decay=self.weight_decay,
                               lamba=lamba, local_rep=local_rep, temperature=temperature), nn.ReLU()]
        layers.append(L0Dense(self.layer_dims[-1], num_classes, droprate_init=0.5, weight_decay=self.weight_decay,
                              lamba=lambas[-1], local_rep=local_rep, temperature=temperature))
        self.output = nn.Sequential(*layers)
        self.layers = [m for m in self.modules() if isinstance(m, L0Dense)]
        if beta_ema > 0.:
            self.avg_param = deepcopy(list(p.data for p in self.parameters()))
            self.steps_ema = 0.

    def forward(self, x):
        return self.output(x)

    def regularization(self):
        regularization = 0.
        for layer in self.layers:
            regularization += - (1. / self.N) * layer.regularization()
        return regularization

    def update_ema(self):
        self.steps_ema += 1
        for p, avg_p in zip(self.parameters(), self.avg_param):
            avg_p.mul_(self.beta_ema).add_((1 - self.beta_ema) * p.data)


total_steps = 0


def train(train_loader, model, criterion, optimizer, epoch):
    """Train for one epoch on the training set"""
    global total_steps, args
    batch_time, data_time, losses, top1 = AverageMeter(), AverageMeter(), AverageMeter(), AverageMeter()
    model.train()
    end = time.time()
    for i, (input_, target) in enumerate(train_loader):
        data_time.update(time.time() - end)
        total_steps += 1
        input_var = torch.autograd.Variable(input_)
        target_var = torch.autograd.Variable(target)

        # compute output
        output = model(input_var)
        loss = criterion(output, target_var, model)

        # measure accuracy and record loss
        prec1 = accuracy(output.data, target, topk=(1,))[0]
        losses.update(loss.data[0], input_.size(0))
        top1.update(100 - prec1[0], input_.size(0))

        # compute gradient and do SGD step
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

        # clamp the parameters
        layers = model.layers if not args.multi_gpu else model.module.layers
        for k, layer in enumerate(layers):
            layer.constrain_parameters()
        if model.beta_ema > 0.:
            model.update_ema()
        batch_time.update(time.time() - end)
        end = time.time()
    return top1.avg


if __name__ == "__main__":
    torch.manual_seed(0)
    args = argparse.Namespace(lr=0.001, multi_gpu=False, epochs=1)
    model = L0MLP(16, 4, layer_dims=(12, 8), N=64, lambas=(1., 1., 1.))
    optimizer = torch.optim.Adam(model.parameters(), args.lr)
    loglike = nn.CrossEntropyLoss()

    def loss_function(output, target_var, model):
        loss = loglike(output, target_var)
        total_loss = loss + model.regularization()
        return total_loss

    train_loader = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(4)]
    weights_before = model.layers[0].weights.detach().clone()
    try:
        for epoch in range(args.epochs):
            train(train_loader, model, loss_function, optimizer, epoch)
        raised = None
    except IndexError as e:
        raised = str(e)
    assert raised is not None and "invalid index of a 0-dim tensor" in raised, raised
    assert total_steps == 1
    with torch.no_grad():
        assert torch.equal(weights_before, model.layers[0].weights)
    print("evidence holds: train() dies on its first batch with IndexError:", raised)
