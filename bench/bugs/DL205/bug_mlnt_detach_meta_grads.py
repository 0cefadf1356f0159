# source: https://github.com/LiJunnan1992/MLNT/issues/8
# category: DL205
# expect: flag 61
# evidence: grad.detach_() on the fast-weight gradients raises "Can't detach views in-place": the fc weight's gradient is a transposed view
import math
import random
from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    """Small classifier whose forward can run with substitute (fast) weights."""

    def __init__(self, num_classes=4):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, num_classes)

    def forward(self, x, weights=None, get_feat=False):
        if weights is None:
            weights = OrderedDict(self.named_parameters())
        feat = F.relu(F.conv2d(x, weights['conv1.weight'], weights['conv1.bias'], padding=1))
        feat = F.adaptive_avg_pool2d(feat, 1).flatten(1)
        out = F.linear(feat, weights['fc.weight'], weights['fc.bias'])
        return (out, feat) if get_feat else out


def train(epoch, net, tch_net, pretrain_net, train_loader, optimizer, args):
    net.train()
    tch_net.train()
    criterion = nn.CrossEntropyLoss()
    consistent_criterion = nn.KLDivLoss(reduction='batchmean')
    for batch_idx, (inputs, targets) in enumerate(train_loader):
        optimizer.zero_grad()
        outputs = net(inputs)
        class_loss = criterion(outputs, targets)
        class_loss.backward(retain_graph=True)

        u = min(1.0, batch_idx / max(1, args['mid_iter']))
        alpha = args['alpha'] * math.exp(-5 * (1 - u) ** 2)
        _, feats = pretrain_net(inputs, get_feat=True)
        p_tch = F.softmax(tch_net(inputs), dim=1)
        p_tch = p_tch.detach()

        for i in range(args['num_fast']):
            targets_fast = targets.clone()
            randidx = torch.randperm(targets.size(0))
            for n in range(int(targets.size(0) * args['perturb_ratio'])):
                idx = randidx[n]
                dist = torch.sum((feats[idx] - feats) ** 2, dim=1)
                _, neighbor = torch.topk(dist, 3, largest=False)
                targets_fast[idx] = targets[neighbor[random.randint(1, 2)]]

            fast_loss = criterion(outputs, targets_fast)
            grads = torch.autograd.grad(fast_loss, net.parameters(), create_graph=True, retain_graph=True,
                                        only_inputs=True)
            for grad in grads:
                grad.detach_()
                grad.requires_grad = False

            fast_weights = OrderedDict((name, param - args['meta_lr'] * grad)
                                       for ((name, param), grad) in zip(net.named_parameters(), grads))
            fast_out = net.forward(inputs, fast_weights)
            logp_fast = F.log_softmax(fast_out, dim=1)
            if i == 0:
                consistent_loss = consistent_criterion(logp_fast, p_tch)
            else:
                consistent_loss = consistent_loss + consistent_criterion(logp_fast, p_tch)

        meta_loss = consistent_loss * alpha / args['num_fast']
        meta_loss.backward()
        optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    random.seed(0)
    net, tch_net, pretrain_net = Net(), Net(), Net()
    for param in list(tch_net.parameters()) + list(pretrain_net.parameters()):
        param.requires_grad = False
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    args = {'alpha': 1, 'mid_iter': 2, 'num_fast': 2, 'perturb_ratio': 0.5, 'meta_lr': 0.02}
    loader = [(torch.randn(6, 3, 4, 4), torch.randint(0, 4, (6,)))]
    try:
        train(1, net, tch_net, pretrain_net, loader, optimizer, args)
    except RuntimeError as err:
        assert "Can't detach views in-place" in str(err)
    else:
        raise AssertionError("detach_ on the view-shaped meta gradients should raise")
    print("evidence holds: autograd.grad returns the fc weight gradient as a view, so grad.detach_() raises")
