# source: https://github.com/hangyu94/Ada-CM/issues/8
# category: DL202
# expect: flag 130, 139, 144, 147
# evidence: the contrastive loss Ls is positive but is built from feature_u/feature_u2 computed under torch.no_grad(), so Ls has no grad_fn and adds nothing to the gradient of loss = Lx*0.5 + Lu + Ls*0.1.
import argparse
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

parser = argparse.ArgumentParser()
parser.add_argument('--lr', default=0.0005, type=float)
parser.add_argument('--train-iteration', type=int, default=3)
parser.add_argument('--ema-decay', default=0.999, type=float)
args = parser.parse_args([])


class ResNet_18(nn.Module):
    """tiny stand-in for the ResNet-18 backbone: returns (logits, normalized feature)"""
    def __init__(self, num_classes=7):
        super(ResNet_18, self).__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        feature = self.features(x).flatten(1)
        out = self.fc(feature)
        return out, F.normalize(feature, dim=1)


def create_model(ema=False):
    model = ResNet_18()
    if ema:
        for param in model.parameters():
            param.detach_()
    return model


class SupConLoss(nn.Module):
    def __init__(self, temperature=0.07, contrast_mode='all', base_temperature=0.07):
        super(SupConLoss, self).__init__()
        self.temperature = temperature
        self.contrast_mode = contrast_mode
        self.base_temperature = base_temperature

    def forward(self, features, labels=None, mask=None):
        batch_size = features.shape[0]
        if labels is None and mask is None:
            mask = torch.eye(batch_size, dtype=torch.float32)
        contrast_count = features.shape[1]
        contrast_feature = torch.cat(torch.unbind(features, dim=1), dim=0)
        anchor_feature = contrast_feature
        anchor_count = contrast_count
        anchor_dot_contrast = torch.div(torch.matmul(anchor_feature, contrast_feature.T), self.temperature)
        logits_max, _ = torch.max(anchor_dot_contrast, dim=1, keepdim=True)
        logits = anchor_dot_contrast - logits_max.detach()
        mask = mask.repeat(anchor_count, contrast_count)
        logits_mask = torch.scatter(torch.ones_like(mask), 1,
                                    torch.arange(batch_size * anchor_count).view(-1, 1), 0)
        mask = mask * logits_mask
        exp_logits = torch.exp(logits) * logits_mask
        log_prob = logits - torch.log(exp_logits.sum(1, keepdim=True))
        mean_log_prob_pos = (mask * log_prob).sum(1) / mask.sum(1)
        loss = - (self.temperature / self.base_temperature) * mean_log_prob_pos
        return loss.view(anchor_count, batch_size).mean()


class WeightEMA(object):
    def __init__(self, model, ema_model, alpha=0.999):
        self.model = model
        self.ema_model = ema_model
        self.alpha = alpha
        self.params = list(model.state_dict().values())
        self.ema_params = list(ema_model.state_dict().values())
        self.wd = 0.02 * args.lr
        for param, ema_param in zip(self.params, self.ema_params):
            param.data.copy_(ema_param.data)

    def step(self):
        one_minus_alpha = 1.0 - self.alpha
        for param, ema_param in zip(self.params, self.ema_params):
            if ema_param.dtype == torch.float32:
                ema_param.mul_(self.alpha)
                ema_param.add_(param * one_minus_alpha)
                param.mul_(1 - self.wd)


class AverageMeter(object):
    def __init__(self):
        self.val = self.avg = self.sum = self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def mask_generate(max_probs, max_idx, batch_size, threshold):
    mask_ori = torch.zeros(batch_size)
    for i in range(7):
        idx = np.where(max_idx.cpu() == i)[0]
        m = max_probs[idx].ge(threshold[i]).float()
        for k in range(len(idx)):
            mask_ori[idx[k]] += m[k].cpu()
    return mask_ori


def train(labeled_trainloader, unlabeled_trainloader, model, optimizer, ema_optimizer, criterion_ce,
          criterion_simclr, threshold, epoch, use_cuda):
    losses = AverageMeter()
    losses_x = AverageMeter()
    losses_u = AverageMeter()
    losses_s = AverageMeter()
    labeled_train_iter = iter(labeled_trainloader)
    unlabeled_train_iter = iter(unlabeled_trainloader)
    model.train()
    for batch_idx in range(args.train_iteration):
        try:
            inputs_x, targets_x = next(labeled_train_iter)
        except StopIteration:
            labeled_train_iter = iter(labeled_trainloader)
            inputs_x, targets_x = next(labeled_train_iter)
        try:
            (inputs_u, inputs_u2, inputs_strong), _ = next(unlabeled_train_iter)
        except StopIteration:
            unlabeled_train_iter = iter(unlabeled_trainloader)
            (inputs_u, inputs_u2, inputs_strong), _ = next(unlabeled_train_iter)
        batch_size = inputs_x.size(0)
        with torch.no_grad():
            outputs_u, feature_u = model(inputs_u)
            outputs_u2, feature_u2 = model(inputs_u2)
            p = (torch.softmax(outputs_u, dim=1) + torch.softmax(outputs_u2, dim=1)) / 2
            max_probs, max_idx = torch.max(p, dim=1)
            max_idx = max_idx.detach()
        output_x, _ = model(inputs_x)
        mask = mask_generate(max_probs, max_idx, batch_size, threshold)
        mask_idx = np.where(mask.cpu() == 0)[0]
        features_prob = torch.cat([feature_u[mask_idx, :].unsqueeze(1), feature_u2[mask_idx, :].unsqueeze(1)], dim=1)
        Lx = criterion_ce(output_x, targets_x).mean()
        if features_prob.shape[0] == 0:
            Ls = torch.from_numpy(np.array(0))
        else:
            Ls = criterion_simclr(features_prob)
        output_strong, _ = model(inputs_strong)
        Lu = (criterion_ce(output_strong, max_idx) * mask).mean()
        loss = Lx * 0.5 + Lu + Ls * 0.1
        losses.update(loss.item(), inputs_x.size(0))
        losses_x.update(Lx.item(), inputs_x.size(0))
        losses_u.update(Lu.item(), inputs_x.size(0))
        losses_s.update(Ls.item(), inputs_x.size(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        ema_optimizer.step()
    return losses.avg, losses_x.avg, losses_u.avg, losses_s.avg


if __name__ == "__main__":
    torch.manual_seed(0)
    np.random.seed(0)
    model = create_model()
    ema_model = create_model(ema=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    ema_optimizer = WeightEMA(model, ema_model, alpha=args.ema_decay)
    criterion_ce = nn.CrossEntropyLoss(reduction='none')
    threshold = [0.8] * 7
    labeled_trainloader = [(torch.randn(4, 3, 8, 8), torch.randint(0, 7, (4,))) for _ in range(3)]
    unlabeled_trainloader = [((torch.randn(4, 3, 8, 8), torch.randn(4, 3, 8, 8), torch.randn(4, 3, 8, 8)), None)
                             for _ in range(3)]
    recorded = []

    class RecordingSupConLoss(SupConLoss):
        def forward(self, features, labels=None, mask=None):
            out = super().forward(features, labels, mask)
            recorded.append((features.requires_grad, out.requires_grad, out.item()))
            return out

    criterion_simclr = RecordingSupConLoss(temperature=0.07)
    train_loss, train_loss_x, train_loss_u, train_loss_s = train(
        labeled_trainloader, unlabeled_trainloader, model, optimizer, ema_optimizer, criterion_ce,
        criterion_simclr, threshold, 0, False)
    assert len(recorded) == 3
    assert all(not f_rg and not l_rg and val > 0 for f_rg, l_rg, val in recorded), recorded
    assert train_loss_s > 0
    print("evidence holds: Ls = %.3f on average but carries no graph, so it never contributes a gradient" % train_loss_s)
