# source: https://github.com/samuelyu2002/ImVisible/issues/2
# category: DL401
# expect: flag 79, 80, 81, 83, 84, 85
# evidence: the three running training losses are summed as tensors and appended per epoch, so the per-epoch history carries grad_fns whose graphs grow with the number of batches and of epochs; the validation sums (under no_grad) carry none
import torch
import torch.nn as nn
import torch.nn.functional as F


class LYTNet(nn.Module):
    """Traffic-light net: a class head (5 modes) and a direction head (2 midline points)."""

    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classes = nn.Linear(8, 5)
        self.direction = nn.Linear(8, 4)

    def forward(self, x):
        h = self.features(x)
        return self.classes(h), self.direction(h)


def my_loss(pred_classes, pred_direc, points, mode):
    MSE = F.mse_loss(pred_direc, points)
    cross_entropy = F.cross_entropy(pred_classes, mode)
    loss = MSE * 0.5 + cross_entropy
    return loss, MSE, cross_entropy


def direction_performance(pred_direc, points):
    with torch.no_grad():
        diff = (pred_direc - points).abs()
        return diff.mean().item(), diff[:, :2].mean().item(), diff[:, 2:].mean().item()


def run(train_dataloader, valid_dataloader, MAX_EPOCHS=2, INIT_LR=0.001):
    net = LYTNet()
    loss_fn = my_loss
    optimizer = torch.optim.Adam(net.parameters(), lr=INIT_LR, weight_decay=0.000005)

    train_losses, train_MSE, train_CE = [], [], []
    valid_losses, valid_MSE, valid_CE = [], [], []
    train_accuracies, valid_accuracies = [], []

    for epoch in range(MAX_EPOCHS):
        # TRAINING
        net.train()
        running_loss = 0.0
        running_loss_MSE = 0.0
        running_loss_cross_entropy = 0.0
        angle_error = 0.0
        startpoint_error = 0.0
        endpoint_error = 0.0
        train_correct = 0
        train_total = 0

        for j, data in enumerate(train_dataloader, 0):
            optimizer.zero_grad()
            train_total += 1

            images = data['image'].type(torch.FloatTensor)
            mode = data['mode']
            points = data['points']

            pred_classes, pred_direc = net(images)
            _, predicted = torch.max(pred_classes, 1)
            train_correct += (predicted == mode).sum().item()
            loss, MSE, cross_entropy = loss_fn(pred_classes, pred_direc, points, mode)
            angle, start, end = direction_performance(pred_direc, points)
            angle_error += angle
            endpoint_error += end
            startpoint_error += start

            loss.backward()
            optimizer.step()

            running_loss += loss
            running_loss_MSE += MSE
            running_loss_cross_entropy += cross_entropy

        train_MSE.append(running_loss_MSE / train_total)
        train_CE.append(running_loss_cross_entropy / train_total)
        train_losses.append(running_loss / train_total)
        train_accuracies.append(train_correct / train_total)

        # VALIDATION
        net.eval()
        val_running_loss = 0
        val_mse_loss = 0
        val_ce_loss = 0
        val_correct = 0
        val_total = 0
        with torch.no_grad():
            for k, data in enumerate(valid_dataloader, 0):
                images = data['image'].type(torch.FloatTensor)
                mode = data['mode']
                points = data['points']
                pred_classes, pred_direc = net(images)
                _, predicted = torch.max(pred_classes, 1)
                val_correct += (predicted == mode).sum().item()
                val_total += 1
                loss, MSE, cross_entropy = loss_fn(pred_classes, pred_direc, points, mode)
                val_running_loss += loss
                val_mse_loss += MSE
                val_ce_loss += cross_entropy
            valid_accuracies.append(100 * val_correct / val_total)
            valid_losses.append(val_running_loss / val_total)
            valid_MSE.append(val_mse_loss / val_total)
            valid_CE.append(val_ce_loss / val_total)

    return train_losses, train_MSE, train_CE, valid_losses


def graph_nodes(t):
    seen, stack = set(), [t.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is not None and fn not in seen:
            seen.add(fn)
            stack.extend(next_fn for next_fn, _ in fn.next_functions)
    return len(seen)


def make_loader(n, bsz=4):
    return [{'image': torch.rand(bsz, 3, 12, 12), 'mode': torch.randint(0, 5, (bsz,)),
             'points': torch.rand(bsz, 4)} for _ in range(n)]


if __name__ == "__main__":
    torch.manual_seed(0)
    sizes = []
    for n_batches in (2, 4):
        train_losses, train_MSE, train_CE, valid_losses = run(make_loader(n_batches), make_loader(2))
        assert all(t.grad_fn is not None for t in train_losses + train_MSE + train_CE)
        assert all(v.grad_fn is None for v in valid_losses)
        sizes.append(graph_nodes(train_losses[-1]))
    assert sizes[0] < sizes[1], sizes
    print("evidence holds: every epoch's training-loss history entry holds its batches' graphs (%s nodes for 2/4 batches)" % sizes)
