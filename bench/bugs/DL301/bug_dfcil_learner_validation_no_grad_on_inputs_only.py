# source: https://github.com/GT-RIPL/AlwaysBeDreaming-DFCIL/issues/9
# category: DL301
# expect: flag 79, 86, 96
# evidence: NormalNN.validation() only wraps the input transfer in no_grad; every model.forward in the validation loop builds a graph (outputs carry grad_fn) that is never backpropagated.
import torch
import torch.nn as nn
import numpy as np


class AverageMeter(object):
    def __init__(self):
        self.sum, self.count, self.avg = 0.0, 0, 0.0

    def update(self, val, n=1):
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        pred = output.argmax(dim=1)
        return (pred == target).float().mean().item() * 100.0


def accumulate_acc(output, target, task, meter, topk):
    meter.update(accuracy(output, target, topk), len(target))
    return meter


class MLP(nn.Module):
    def __init__(self, out_dim=10, in_dim=16):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(in_dim, 32), nn.ReLU(), nn.Linear(32, out_dim))

    def forward(self, x):
        return self.body(x)


class NormalNN(nn.Module):
    def __init__(self, learner_config):
        super(NormalNN, self).__init__()
        self.log = print
        self.config = learner_config
        self.out_dim = learner_config['out_dim']
        self.model = MLP(out_dim=self.out_dim)
        self.top_k = learner_config['top_k']
        self.criterion_fn = nn.CrossEntropyLoss(reduction="none")
        self.gpu = learner_config['gpuid'][0] >= 0
        self.valid_out_dim = self.out_dim
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=learner_config['lr'], momentum=0.9)

    def forward(self, x):
        return self.model.forward(x)[:, :self.valid_out_dim]

    def update_model(self, inputs, targets):
        logits = self.forward(inputs)
        total_loss = self.criterion_fn(logits, targets.long()).mean()
        self.optimizer.zero_grad()
        total_loss.backward()
        self.optimizer.step()
        return total_loss.detach(), logits

    def learn_batch(self, train_loader, val_loader=None):
        for epoch in range(self.config['schedule'][-1]):
            for i, (x, y, task) in enumerate(train_loader):
                self.model.train()
                loss, output = self.update_model(x, y)
            self.log('Epoch:{epoch:.0f} loss {loss:.3f}'.format(epoch=epoch + 1, loss=loss.item()))
            if val_loader is not None:
                self.validation(val_loader)

    def validation(self, dataloader, model=None, task_in=None, verbal=True):
        if model is None:
            model = self.model
        acc = AverageMeter()
        orig_mode = model.training
        model.eval()
        for i, (input, target, task) in enumerate(dataloader):

            if self.gpu:
                with torch.no_grad():
                    input = input.cuda()
                    target = target.cuda()
            if task_in is None:
                output = model.forward(input)[:, :self.valid_out_dim]
                acc = accumulate_acc(output, target, task, acc, topk=(self.top_k,))
            else:
                mask = target >= task_in[0]
                mask_ind = mask.nonzero().view(-1)
                input, target = input[mask_ind], target[mask_ind]
                mask = target < task_in[-1]
                mask_ind = mask.nonzero().view(-1)
                input, target = input[mask_ind], target[mask_ind]
                if len(target) > 1:
                    output = model.forward(input)[:, task_in]
                    acc = accumulate_acc(output, target - task_in[0], task, acc, topk=(self.top_k,))
        model.train(orig_mode)
        if verbal:
            self.log(' * Val Acc {acc.avg:.3f}'.format(acc=acc))
        return acc.avg


if __name__ == "__main__":
    torch.manual_seed(0)
    np.random.seed(0)
    learner_config = {'out_dim': 10, 'top_k': 1, 'gpuid': [-1], 'lr': 0.05, 'schedule': [2]}
    learner = NormalNN(learner_config)

    def make_loader(n):
        return [(torch.randn(8, 16), torch.randint(0, 10, (8,)), torch.zeros(8)) for _ in range(n)]

    train_loader, val_loader = make_loader(4), make_loader(3)

    learner.learn_batch(train_loader, val_loader)

    # record what validation() hands to its metric helper
    seen = []
    _orig_accumulate_acc = accumulate_acc

    def accumulate_acc(output, target, task, meter, topk):
        seen.append((output.grad_fn is not None, learner.model.training, torch.is_grad_enabled()))
        return _orig_accumulate_acc(output, target, task, meter, topk)

    learner.validation(val_loader, task_in=[0, 5])
    learner.validation(val_loader)

    assert len(seen) >= len(val_loader), seen
    assert all(has_graph and not training and grad_on for has_graph, training, grad_on in seen), seen
    print("evidence holds: %d eval-mode forwards in validation() all returned outputs with grad_fn "
          "(graph built, never backpropagated)" % len(seen))
