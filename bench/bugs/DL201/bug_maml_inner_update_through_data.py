# source: https://github.com/KanishJebaMathewM/Truxify/issues/13118
# category: DL201
# expect: flag 29, 34
# evidence: after meta_train_step() every meta-parameter of self.model has grad None and the meta-model's weights are exactly as before
import copy

import torch
import torch.nn as nn


class DemandModel(nn.Module):
    def __init__(self, in_dim=6, hidden=16):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        return self.net(x)


class MAMLLearner:
    def __init__(self, model, inner_lr=0.05, meta_lr=1e-2, inner_steps=2):
        self.model = model
        self.inner_lr = inner_lr
        self.inner_steps = inner_steps
        self.criterion = nn.MSELoss()
        self.meta_optimizer = torch.optim.Adam(self.model.parameters(), lr=meta_lr)

    def inner_update(self, model, support_x, support_y):
        adapted_model = copy.deepcopy(model)
        for _ in range(self.inner_steps):
            loss = self.criterion(adapted_model(support_x), support_y)
            grads = torch.autograd.grad(loss, adapted_model.parameters(), create_graph=True)
            for param, grad in zip(adapted_model.parameters(), grads):
                param.data -= self.inner_lr * grad
        return adapted_model

    def outer_update(self, meta_loss):
        self.meta_optimizer.zero_grad()
        meta_loss.backward()
        self.meta_optimizer.step()

    def meta_train_step(self, tasks):
        meta_loss = 0.0
        for support_x, support_y, query_x, query_y in tasks:
            adapted_model = self.inner_update(self.model, support_x, support_y)
            pred = adapted_model(query_x)
            task_loss = self.criterion(pred, query_y)
            meta_loss += task_loss
        meta_loss = meta_loss / len(tasks)
        self.outer_update(meta_loss)
        return meta_loss.item()


def make_task(in_dim=6):
    w = torch.randn(in_dim, 1)
    xs, xq = torch.randn(5, in_dim), torch.randn(5, in_dim)
    return xs, xs @ w, xq, xq @ w


if __name__ == "__main__":
    torch.manual_seed(0)
    learner = MAMLLearner(DemandModel())
    tasks = [make_task() for _ in range(3)]
    before = [p.detach().clone() for p in learner.model.parameters()]
    learner.meta_train_step(tasks)
    assert all(p.grad is None for p in learner.model.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, learner.model.parameters()))
    print("evidence holds: the query loss never reaches self.model, so the meta-optimizer steps on nothing")
