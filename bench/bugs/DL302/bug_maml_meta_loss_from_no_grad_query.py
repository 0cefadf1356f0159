# source: https://github.com/dragen1860/MAML-Pytorch/issues/40
# category: DL302
# expect: flag 73, 102
# evidence: with update_step=1 the meta loss is the query loss computed under no_grad and loss_q.backward() raises "element 0 of tensors does not require grad"; update_step=2 trains
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn
from torch import optim
from torch.nn import functional as F


class Learner(nn.Module):
    """A small functional MLP: forward can run on the module's own weights or on fast weights."""

    def __init__(self, in_dim, n_way, hidden=16):
        super(Learner, self).__init__()
        self.vars = nn.ParameterList([
            nn.Parameter(torch.randn(hidden, in_dim) * 0.1),
            nn.Parameter(torch.zeros(hidden)),
            nn.Parameter(torch.randn(n_way, hidden) * 0.1),
            nn.Parameter(torch.zeros(n_way)),
        ])

    def forward(self, x, vars=None, bn_training=True):
        if vars is None:
            vars = self.vars
        w1, b1, w2, b2 = vars
        x = F.relu(F.linear(x, w1, b1))
        return F.linear(x, w2, b2)

    def parameters(self, recurse=True):
        return self.vars


class Meta(nn.Module):
    """Meta learner: inner SGD steps on the support set, meta update on the query loss."""

    def __init__(self, args):
        super(Meta, self).__init__()
        self.update_lr = args.update_lr
        self.meta_lr = args.meta_lr
        self.update_step = args.update_step
        self.net = Learner(args.in_dim, args.n_way)
        self.meta_optim = optim.Adam(self.net.parameters(), lr=self.meta_lr)

    def forward(self, x_spt, y_spt, x_qry, y_qry):
        task_num = x_spt.size(0)
        querysz = x_qry.size(1)

        losses_q = [0 for _ in range(self.update_step + 1)]
        corrects = [0 for _ in range(self.update_step + 1)]

        for i in range(task_num):
            # 1. run the i-th task and compute loss for k=0
            logits = self.net(x_spt[i], vars=None, bn_training=True)
            loss = F.cross_entropy(logits, y_spt[i])
            grad = torch.autograd.grad(loss, self.net.parameters())
            fast_weights = list(map(lambda p: p[1] - self.update_lr * p[0], zip(grad, self.net.parameters())))

            # loss and accuracy before the first update
            with torch.no_grad():
                logits_q = self.net(x_qry[i], self.net.parameters(), bn_training=True)
                loss_q = F.cross_entropy(logits_q, y_qry[i])
                losses_q[0] += loss_q

                pred_q = F.softmax(logits_q, dim=1).argmax(dim=1)
                correct = torch.eq(pred_q, y_qry[i]).sum().item()
                corrects[0] = corrects[0] + correct

            # loss and accuracy after the first update
            with torch.no_grad():
                logits_q = self.net(x_qry[i], fast_weights, bn_training=True)
                loss_q = F.cross_entropy(logits_q, y_qry[i])
                losses_q[1] += loss_q
                pred_q = F.softmax(logits_q, dim=1).argmax(dim=1)
                correct = torch.eq(pred_q, y_qry[i]).sum().item()
                corrects[1] = corrects[1] + correct

            for k in range(1, self.update_step):
                logits = self.net(x_spt[i], fast_weights, bn_training=True)
                loss = F.cross_entropy(logits, y_spt[i])
                grad = torch.autograd.grad(loss, fast_weights)
                fast_weights = list(map(lambda p: p[1] - self.update_lr * p[0], zip(grad, fast_weights)))

                logits_q = self.net(x_qry[i], fast_weights, bn_training=True)
                # loss_q is overwritten: only the last update step's query loss is kept
                loss_q = F.cross_entropy(logits_q, y_qry[i])
                losses_q[k + 1] += loss_q

                with torch.no_grad():
                    pred_q = F.softmax(logits_q, dim=1).argmax(dim=1)
                    correct = torch.eq(pred_q, y_qry[i]).sum().item()
                    corrects[k + 1] = corrects[k + 1] + correct

        # sum over all losses on the query set across all tasks
        loss_q = losses_q[-1] / task_num

        # optimize theta parameters
        self.meta_optim.zero_grad()
        loss_q.backward()
        self.meta_optim.step()

        accs = np.array(corrects) / (querysz * task_num)
        return accs


def make_batch(task_num=2, n_way=3, k_spt=2, k_qry=3, in_dim=8):
    x_spt = torch.randn(task_num, n_way * k_spt, in_dim)
    y_spt = torch.arange(n_way).repeat(k_spt).expand(task_num, -1)
    x_qry = torch.randn(task_num, n_way * k_qry, in_dim)
    y_qry = torch.arange(n_way).repeat(k_qry).expand(task_num, -1)
    return x_spt, y_spt, x_qry, y_qry


if __name__ == "__main__":
    torch.manual_seed(0)
    batch = make_batch()

    # the reporter's setting: a single inner update
    args = SimpleNamespace(update_lr=0.4, meta_lr=1e-3, update_step=1, in_dim=8, n_way=3)
    maml = Meta(args)
    before = [p.detach().clone() for p in maml.net.parameters()]
    try:
        maml(*batch)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised is not None and "element 0 of tensors does not require grad" in raised, raised
    assert all(torch.equal(b, p) for b, p in zip(before, maml.net.parameters()))

    # the default setting (more than one inner update) builds the meta loss with grad
    args2 = SimpleNamespace(update_lr=0.4, meta_lr=1e-3, update_step=2, in_dim=8, n_way=3)
    maml2 = Meta(args2)
    before2 = [p.detach().clone() for p in maml2.net.parameters()]
    maml2(*batch)
    assert any(not torch.equal(b, p) for b, p in zip(before2, maml2.net.parameters()))
    print("evidence holds: update_step=1 backpropagates a query loss built under no_grad and raises; update_step=2 updates the weights")
