# source: https://github.com/YU1ut/MixMatch-pytorch/issues/16
# category: DL101
# expect: clean
# evidence: the .data edits in WeightEMA.step() touch only leaf parameters after optimizer.step(); training still gets gradients on every model parameter, the model changes, and the EMA copy tracks it.
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Args:
    lr = 0.002
    T = 0.5
    alpha = 0.75
    lambda_u = 75
    epochs = 4
    val_iteration = 3
    ema_decay = 0.9


args = Args()


class WideResNet(nn.Module):
    # tiny stand-in with the same kind of layers (conv + batchnorm + fc)
    def __init__(self, num_classes=10):
        super(WideResNet, self).__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, num_classes)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.adaptive_avg_pool2d(out, 1).view(-1, 4)
        return self.fc(out)


class AverageMeter(object):
    def __init__(self):
        self.sum, self.count, self.avg = 0.0, 0, 0.0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def linear_rampup(current, rampup_length=args.epochs):
    if rampup_length == 0:
        return 1.0
    current = np.clip(current / rampup_length, 0.0, 1.0)
    return float(current)


class SemiLoss(object):
    def __call__(self, outputs_x, targets_x, outputs_u, targets_u, epoch):
        probs_u = torch.softmax(outputs_u, dim=1)
        Lx = -torch.mean(torch.sum(F.log_softmax(outputs_x, dim=1) * targets_x, dim=1))
        Lu = torch.mean((probs_u - targets_u)**2)
        return Lx, Lu, args.lambda_u * linear_rampup(epoch)


class WeightEMA(object):
    def __init__(self, model, ema_model, alpha=0.999):
        self.model = model
        self.ema_model = ema_model
        self.alpha = alpha
        self.tmp_model = WideResNet(num_classes=10)
        self.wd = 0.02 * args.lr

        for param, ema_param in zip(self.model.parameters(), self.ema_model.parameters()):
            ema_param.data.copy_(param.data)

    def step(self, bn=False):
        if bn:
            # copy batchnorm stats to ema model
            for ema_param, tmp_param in zip(self.ema_model.parameters(), self.tmp_model.parameters()):
                tmp_param.data.copy_(ema_param.data.detach())

            self.ema_model.load_state_dict(self.model.state_dict())

            for ema_param, tmp_param in zip(self.ema_model.parameters(), self.tmp_model.parameters()):
                ema_param.data.copy_(tmp_param.data.detach())
        else:
            one_minus_alpha = 1.0 - self.alpha
            for param, ema_param in zip(self.model.parameters(), self.ema_model.parameters()):
                ema_param.data.mul_(self.alpha)
                ema_param.data.add_(param.data.detach() * one_minus_alpha)
                # customized weight decay
                param.data.mul_(1 - self.wd)


def interleave_offsets(batch, nu):
    groups = [batch // (nu + 1)] * (nu + 1)
    for x in range(batch - sum(groups)):
        groups[-x - 1] += 1
    offsets = [0]
    for g in groups:
        offsets.append(offsets[-1] + g)
    assert offsets[-1] == batch
    return offsets


def interleave(xy, batch):
    nu = len(xy) - 1
    offsets = interleave_offsets(batch, nu)
    xy = [[v[offsets[p]:offsets[p + 1]] for p in range(nu + 1)] for v in xy]
    for i in range(1, nu + 1):
        xy[0][i], xy[i][i] = xy[i][i], xy[0][i]
    return [torch.cat(v, dim=0) for v in xy]


def train(labeled_trainloader, unlabeled_trainloader, model, optimizer, ema_optimizer, criterion, epoch, grad_log):
    losses = AverageMeter()
    labeled_train_iter = iter(labeled_trainloader)
    unlabeled_train_iter = iter(unlabeled_trainloader)

    model.train()
    for batch_idx in range(args.val_iteration):
        try:
            inputs_x, targets_x = next(labeled_train_iter)
        except StopIteration:
            labeled_train_iter = iter(labeled_trainloader)
            inputs_x, targets_x = next(labeled_train_iter)

        try:
            inputs_u, inputs_u2 = next(unlabeled_train_iter)
        except StopIteration:
            unlabeled_train_iter = iter(unlabeled_trainloader)
            inputs_u, inputs_u2 = next(unlabeled_train_iter)

        batch_size = inputs_x.size(0)

        # Transform label to one-hot
        targets_x = torch.zeros(batch_size, 10).scatter_(1, targets_x.view(-1, 1), 1)

        with torch.no_grad():
            # compute guessed labels of unlabel samples
            outputs_u = model(inputs_u)
            outputs_u2 = model(inputs_u2)
            p = (torch.softmax(outputs_u, dim=1) + torch.softmax(outputs_u2, dim=1)) / 2
            pt = p**(1/args.T)
            targets_u = pt / pt.sum(dim=1, keepdim=True)
            targets_u = targets_u.detach()

        # mixup
        all_inputs = torch.cat([inputs_x, inputs_u, inputs_u2], dim=0)
        all_targets = torch.cat([targets_x, targets_u, targets_u], dim=0)

        l = np.random.beta(args.alpha, args.alpha)
        l = max(l, 1-l)
        idx = torch.randperm(all_inputs.size(0))

        input_a, input_b = all_inputs, all_inputs[idx]
        target_a, target_b = all_targets, all_targets[idx]

        mixed_input = l * input_a + (1 - l) * input_b
        mixed_target = l * target_a + (1 - l) * target_b

        # interleave labeled and unlabed samples between batches to get correct batchnorm calculation
        mixed_input = list(torch.split(mixed_input, batch_size))
        mixed_input = interleave(mixed_input, batch_size)

        logits = [model(mixed_input[0])]
        for input in mixed_input[1:]:
            logits.append(model(input))

        # put interleaved samples back
        logits = interleave(logits, batch_size)
        logits_x = logits[0]
        logits_u = torch.cat(logits[1:], dim=0)

        Lx, Lu, w = criterion(logits_x, mixed_target[:batch_size], logits_u, mixed_target[batch_size:],
                              epoch+batch_idx/args.val_iteration)

        loss = Lx + w * Lu

        # record loss
        losses.update(loss.item(), inputs_x.size(0))

        # compute gradient and do SGD step
        optimizer.zero_grad()
        loss.backward()
        grad_log.append(all(p.grad is not None and p.grad.abs().sum().item() > 0 for p in model.parameters()))
        optimizer.step()
        ema_optimizer.step()

    ema_optimizer.step(bn=True)

    return losses.avg


if __name__ == "__main__":
    torch.manual_seed(0)
    np.random.seed(0)
    g = torch.Generator().manual_seed(0)
    xs = torch.randn(8, 3, 8, 8, generator=g)
    ys = torch.randint(0, 10, (8,), generator=g)
    us = torch.randn(8, 3, 8, 8, generator=g)
    us2 = us + 0.1 * torch.randn(8, 3, 8, 8, generator=g)
    labeled_trainloader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xs, ys), batch_size=4, shuffle=True)
    unlabeled_trainloader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(us, us2), batch_size=4, shuffle=True)

    def create_model(ema=False):
        model = WideResNet(num_classes=10)
        if ema:
            for param in model.parameters():
                param.detach_()
        return model

    model = create_model()
    ema_model = create_model(ema=True)
    criterion = SemiLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    ema_optimizer = WeightEMA(model, ema_model, alpha=args.ema_decay)

    before = [p.detach().clone() for p in model.parameters()]
    ema_before = [p.detach().clone() for p in ema_model.parameters()]
    grad_log = []
    for epoch in range(2):
        train(labeled_trainloader, unlabeled_trainloader, model, optimizer, ema_optimizer, criterion, epoch, grad_log)

    assert len(grad_log) == 6 and all(grad_log), grad_log
    with torch.no_grad():
        assert all(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
        assert any(not torch.equal(b, p) for b, p in zip(ema_before, ema_model.parameters()))
    print("evidence holds: every step gave non-zero gradients to all model parameters, model and EMA weights both moved")
