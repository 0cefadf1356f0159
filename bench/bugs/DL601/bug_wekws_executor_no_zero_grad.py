# source: https://github.com/wenet-e2e/wekws/pull/73
# category: DL601
# expect: flag 80, 83
# evidence: Executor.train calls loss.backward() and optimizer.step() every batch but never zeroes gradients, so the gradient used at step k is the sum of the gradients of batches 1..k.
import copy
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import clip_grad_norm_


def max_pooling_loss(logits, target, lengths, min_duration=0):
    logits = torch.sigmoid(logits)
    num_utts = logits.size(0)
    num_keywords = logits.size(2)
    loss = 0.0
    for i in range(num_utts):
        for j in range(num_keywords):
            prob = logits[i, :lengths[i], j]
            if target[i] == j:
                max_prob = prob.max().clamp(1e-8, 1.0)
                loss += -torch.log(max_prob)
            else:
                prob = 1 - prob
                min_prob = prob.min().clamp(1e-8, 1.0)
                loss += -torch.log(min_prob)
    loss = loss / num_utts
    acc = 0.0
    return loss, acc


def criterion(type, logits, target, lengths, min_duration=0):
    if type == 'max_pooling':
        loss, acc = max_pooling_loss(logits, target, lengths, min_duration)
        return loss, acc
    exit(1)


class KWSModel(nn.Module):
    def __init__(self, idim=10, hdim=16, odim=2):
        super().__init__()
        self.preprocessing = nn.Linear(idim, hdim)
        self.backbone = nn.GRU(hdim, hdim, batch_first=True)
        self.classifier = nn.Linear(hdim, odim)

    def forward(self, x, in_cache=None):
        x = self.preprocessing(x)
        x, out_cache = self.backbone(x)
        x = self.classifier(x)
        return x, out_cache


class Executor:
    def __init__(self):
        self.step = 0

    def train(self, model, optimizer, data_loader, device, writer, args):
        ''' Train one epoch
        '''
        model.train()
        clip = args.get('grad_clip', 50.0)
        log_interval = args.get('log_interval', 10)
        epoch = args.get('epoch', 0)
        min_duration = args.get('min_duration', 0)

        for batch_idx, batch in enumerate(data_loader):
            key, feats, target, feats_lengths = batch
            feats = feats.to(device)
            target = target.to(device)
            feats_lengths = feats_lengths.to(device)
            num_utts = feats_lengths.size(0)
            if num_utts == 0:
                continue
            logits, _ = model(feats)
            loss_type = args.get('criterion', 'max_pooling')
            loss, acc = criterion(loss_type, logits, target, feats_lengths,
                                  min_duration=min_duration)
            loss.backward()
            grad_norm = clip_grad_norm_(model.parameters(), clip)
            if torch.isfinite(grad_norm):
                optimizer.step()
            if batch_idx % log_interval == 0:
                logging.debug(
                    'TRAIN Batch {}/{} loss {:.8f} acc {:.8f}'.format(
                        epoch, batch_idx, loss.item(), acc))


if __name__ == "__main__":
    torch.manual_seed(0)
    model = KWSModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data_loader = [
        (['utt%d' % i], torch.randn(3, 12, 10), torch.randint(0, 2, (3,)), torch.tensor([12, 10, 8]))
        for i in range(3)
    ]
    args = {'grad_clip': 1e9, 'log_interval': 10, 'epoch': 0, 'criterion': 'max_pooling'}

    snapshots = []
    real_step = optimizer.step

    def recording_step(*a, **k):
        snapshots.append(([p.detach().clone() for p in model.parameters()],
                          [p.grad.detach().clone() for p in model.parameters()]))
        return real_step(*a, **k)

    optimizer.step = recording_step
    Executor().train(model, optimizer, data_loader, 'cpu', None, args)

    fresh = []
    for (params, _), batch in zip(snapshots, data_loader):
        probe = copy.deepcopy(model)
        with torch.no_grad():
            for p, v in zip(probe.parameters(), params):
                p.copy_(v)
        logits, _ = probe(batch[1])
        loss, _ = criterion('max_pooling', logits, batch[2], batch[3])
        fresh.append([g.detach() for g in torch.autograd.grad(loss, list(probe.parameters()))])

    names = [n for n, _ in model.named_parameters()]
    w = names.index('classifier.weight')
    used_at_3 = snapshots[2][1][w]
    assert torch.allclose(used_at_3, fresh[0][w] + fresh[1][w] + fresh[2][w], atol=1e-5)
    assert not torch.allclose(used_at_3, fresh[2][w], atol=1e-5)
    print("evidence holds: the gradient applied at step 3 equals the sum of the gradients of batches 1, 2 and 3")
