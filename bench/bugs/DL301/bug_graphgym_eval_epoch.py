# source: https://github.com/snap-stanford/GraphGym/pull/11
# category: DL301
# expect: flag 85, 87
# evidence: train() calls eval_epoch() on the val/test splits after every training epoch; eval_epoch sets model.eval() and runs the GNN on every batch with grad enabled, so each prediction carries a grad_fn and autograd saves activations
import logging
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class cfg:
    device = 'cpu'
    params = 0

    class optim:
        max_epoch = 2


class Batch(object):
    def __init__(self, x, edge_index, y):
        self.x, self.edge_index, self.y = x, edge_index, y

    def to(self, device):
        self.x, self.edge_index, self.y = self.x.to(device), self.edge_index.to(device), self.y.to(device)
        return self


class GNN(nn.Module):
    def __init__(self, dim_in=4, dim_hidden=8, dim_out=3):
        super().__init__()
        self.pre_mp = nn.Linear(dim_in, dim_hidden)
        self.mp = nn.Linear(dim_hidden, dim_hidden)
        self.post_mp = nn.Linear(dim_hidden, dim_out)

    def forward(self, batch):
        h = F.relu(self.pre_mp(batch.x))
        src, dst = batch.edge_index
        agg = torch.zeros_like(h).index_add(0, dst, h[src])
        h = F.relu(self.mp(h + agg))
        return self.post_mp(h), batch.y


def compute_loss(pred, true):
    loss = F.cross_entropy(pred, true)
    return loss, F.softmax(pred, dim=-1)


class Logger(object):
    def __init__(self, name):
        self.name = name
        self.stats = []
        self.epochs = []

    def update_stats(self, true, pred, loss, lr, time_used, params):
        self.stats.append((true, pred, loss))

    def write_epoch(self, cur_epoch):
        loss = sum(s[2] for s in self.stats) / max(len(self.stats), 1)
        self.epochs.append(loss)
        logging.info('{} epoch {} loss {:.4f}'.format(self.name, cur_epoch, loss))
        self.stats = []


def train_epoch(logger, loader, model, optimizer, scheduler):
    model.train()
    time_start = time.time()
    for batch in loader:
        optimizer.zero_grad()
        batch.to(torch.device(cfg.device))
        pred, true = model(batch)
        loss, pred_score = compute_loss(pred, true)
        loss.backward()
        optimizer.step()
        logger.update_stats(true=true.detach().cpu(), pred=pred_score.detach().cpu(), loss=loss.item(),
                            lr=scheduler.get_last_lr()[0], time_used=time.time() - time_start, params=cfg.params)
        time_start = time.time()
    scheduler.step()


def eval_epoch(logger, loader, model):
    model.eval()
    time_start = time.time()
    for batch in loader:
        batch.to(torch.device(cfg.device))
        pred, true = model(batch)
        loss, pred_score = compute_loss(pred, true)
        logger.update_stats(true=true.detach().cpu(), pred=pred_score.detach().cpu(), loss=loss.item(), lr=0,
                            time_used=time.time() - time_start, params=cfg.params)
        time_start = time.time()


def train(loggers, loaders, model, optimizer, scheduler):
    start_epoch = 0
    num_splits = len(loggers)
    for cur_epoch in range(start_epoch, cfg.optim.max_epoch):
        train_epoch(loggers[0], loaders[0], model, optimizer, scheduler)
        loggers[0].write_epoch(cur_epoch)
        for i in range(1, num_splits):
            eval_epoch(loggers[i], loaders[i], model)
            loggers[i].write_epoch(cur_epoch)


def make_loader(n):
    return [Batch(torch.randn(6, 4), torch.randint(0, 6, (2, 10)), torch.randint(0, 3, (6,))) for _ in range(n)]


if __name__ == "__main__":
    torch.manual_seed(0)
    model = GNN()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    eval_preds = []

    def record(module, inputs, output):
        if not module.training:
            eval_preds.append(output[0])

    model.register_forward_hook(record)
    loggers = [Logger('train'), Logger('val'), Logger('test')]
    train(loggers, [make_loader(2), make_loader(2), make_loader(2)], model, optimizer, scheduler)
    assert len(eval_preds) == 8 and all(p.grad_fn is not None for p in eval_preds)
    grads = torch.autograd.grad(eval_preds[-1].sum(), model.post_mp.weight)
    assert grads[0].abs().sum() > 0
    print("evidence holds: all %d val/test predictions (model in eval mode) carry grad_fns back to the weights"
          % len(eval_preds))
