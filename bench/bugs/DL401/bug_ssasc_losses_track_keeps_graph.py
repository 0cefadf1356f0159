# source: https://github.com/jokester-zzz/SSA-SC/issues/2
# category: DL401
# expect: flag 26, 113
# evidence: the epoch-loss tracker adds the loss tensors themselves, so train_losses['total'] carries a grad_fn and the graph reachable from it grows with every training iteration
import torch
import torch.nn as nn
import torch.nn.functional as F


class LossesTrackEpoch:
    def __init__(self, num_iterations):
        self.num_iterations = num_iterations
        self.validation_losses = {}
        self.train_losses = {}
        self.train_iteration_counts = 0
        self.validation_iteration_counts = 0

    def set_validation_losses(self, keys):
        self.validation_losses = {key: 0 for key in keys}

    def set_train_losses(self, keys):
        self.train_losses = {key: 0 for key in keys}

    def update_train_losses(self, loss):
        for key in loss:
            self.train_losses[key] += loss[key]
        self.train_iteration_counts += 1

    def update_validaiton_losses(self, loss):
        for key in loss:
            self.validation_losses[key] += loss[key]
        self.validation_iteration_counts += 1

    def restart_train_losses(self):
        for key in self.train_losses.keys():
            self.train_losses[key] = 0
        self.train_iteration_counts = 0

    def restart_validation_losses(self):
        for key in self.validation_losses.keys():
            self.validation_losses[key] = 0
        self.validation_iteration_counts = 0


class Metrics:
    def __init__(self, nbr_classes, num_iterations_epoch):
        self.nbr_classes = nbr_classes
        self.losses_track = LossesTrackEpoch(num_iterations_epoch)
        self.correct, self.total = 0, 0

    def add_batch(self, prediction, target):
        self.correct += (prediction.argmax(1) == target).sum().item()
        self.total += target.numel()

    def reset_evaluator(self):
        self.correct, self.total = 0, 0


class LMSCNet(nn.Module):
    def __init__(self, nbr_classes=4):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.seg_head_1_1 = nn.Conv2d(8, nbr_classes, 1)
        self.seg_head_1_2 = nn.Conv2d(8, nbr_classes, 1)

    def forward(self, data, stat='train'):
        x = F.relu(self.conv(data['occupancy']))
        return [self.seg_head_1_1(x), self.seg_head_1_2(F.avg_pool2d(x, 2))]

    def compute_loss(self, scores, data):
        target = data['label_1_1']
        loss_1_1 = F.cross_entropy(scores[0], target)
        loss_1_2 = F.cross_entropy(scores[1], F.max_pool2d(target.unsqueeze(1).float(), 2).squeeze(1).long())
        return {'total': loss_1_1 + loss_1_2, 'semantic_1_1': loss_1_1, 'semantic_1_2': loss_1_2}

    def get_train_loss_keys(self):
        return ['total', 'semantic_1_1', 'semantic_1_2']

    def get_validation_loss_keys(self):
        return ['total', 'semantic_1_1', 'semantic_1_2']


def validate(model, dset, metrics):
    model.eval()
    with torch.no_grad():
        for t, data in enumerate(dset):
            scores = model(data, stat='val')
            loss = model.compute_loss(scores, data)
            metrics.losses_track.update_validaiton_losses(loss)
            metrics.add_batch(prediction=scores[0], target=data['label_1_1'])
        epoch_loss = metrics.losses_track.validation_losses['total'] / metrics.losses_track.validation_iteration_counts
    return epoch_loss


def train(model, optimizer, dataset, nbr_epochs=1):
    dset = dataset['train']
    metrics = Metrics(4, len(dset))
    metrics.losses_track.set_validation_losses(model.get_validation_loss_keys())
    metrics.losses_track.set_train_losses(model.get_train_loss_keys())
    history = []

    for epoch in range(1, nbr_epochs + 1):
        model.train()
        for t, data in enumerate(dset):
            scores = model(data)
            loss = model.compute_loss(scores, data)

            optimizer.zero_grad()
            loss['total'].backward()
            optimizer.step()

            # Updating batch losses to then get mean for epoch loss
            metrics.losses_track.update_train_losses(loss)
            metrics.add_batch(prediction=scores[0], target=data['label_1_1'])

        epoch_loss = metrics.losses_track.train_losses['total'] / metrics.losses_track.train_iteration_counts
        history.append(epoch_loss)
        metrics.reset_evaluator()
        validate(model, dataset['val'], metrics)
        last_train_total = metrics.losses_track.train_losses['total']
        metrics.losses_track.restart_train_losses()
        metrics.losses_track.restart_validation_losses()
    return history, last_train_total


def graph_nodes(t):
    seen, stack = set(), [t.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is not None and fn not in seen:
            seen.add(fn)
            stack.extend(next_fn for next_fn, _ in fn.next_functions)
    return len(seen)


def make_dset(n):
    return [{'occupancy': torch.rand(2, 1, 8, 8), 'label_1_1': torch.randint(0, 4, (2, 8, 8))} for _ in range(n)]


if __name__ == "__main__":
    torch.manual_seed(0)
    sizes = []
    for n_iter in (2, 4, 6):
        model = LMSCNet()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        history, total = train(model, optimizer, {'train': make_dset(n_iter), 'val': make_dset(2)})
        assert total.grad_fn is not None and history[0].requires_grad
        sizes.append(graph_nodes(total))
    assert sizes[0] < sizes[1] < sizes[2], sizes
    print("evidence holds: the tracked train loss holds every iteration's graph: %s nodes for 2/4/6 iterations" % sizes)
