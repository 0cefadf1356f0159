# source: https://github.com/sgrvinod/a-PyTorch-Tutorial-to-Object-Detection/blob/master/model.py
# category: DL204
# expect: clean
# evidence: hard-negative mining zeroes positives in a clone of conf_loss_all; backward works and the positive priors still get their gradient
import torch
from torch import nn


class MultiBoxLoss(nn.Module):
    """Localization loss on positive priors plus confidence loss with hard negative mining."""

    def __init__(self, threshold=0.5, neg_pos_ratio=3, alpha=1.):
        super(MultiBoxLoss, self).__init__()
        self.threshold = threshold
        self.neg_pos_ratio = neg_pos_ratio
        self.alpha = alpha
        self.smooth_l1 = nn.L1Loss()
        self.cross_entropy = nn.CrossEntropyLoss(reduction='none')

    def forward(self, predicted_locs, predicted_scores, true_locs, true_classes):
        batch_size = predicted_locs.size(0)
        n_priors = predicted_locs.size(1)
        n_classes = predicted_scores.size(2)

        positive_priors = true_classes != 0
        loc_loss = self.smooth_l1(predicted_locs[positive_priors], true_locs[positive_priors])

        n_positives = positive_priors.sum(dim=1)
        n_hard_negatives = self.neg_pos_ratio * n_positives

        conf_loss_all = self.cross_entropy(predicted_scores.view(-1, n_classes), true_classes.view(-1))
        conf_loss_all = conf_loss_all.view(batch_size, n_priors)

        conf_loss_pos = conf_loss_all[positive_priors]

        conf_loss_neg = conf_loss_all.clone()
        conf_loss_neg[positive_priors] = 0.
        conf_loss_neg, _ = conf_loss_neg.sort(dim=1, descending=True)
        hardness_ranks = torch.arange(n_priors).unsqueeze(0).expand_as(conf_loss_neg)
        hard_negatives = hardness_ranks < n_hard_negatives.unsqueeze(1)
        conf_loss_hard_neg = conf_loss_neg[hard_negatives]

        conf_loss = (conf_loss_hard_neg.sum() + conf_loss_pos.sum()) / n_positives.sum().float()
        return conf_loss + self.alpha * loc_loss


def train_step(head, criterion, optimizer, features, boxes, labels):
    locs, scores = head(features)
    loss = criterion(locs, scores, boxes, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


class SSDHead(nn.Module):
    def __init__(self, in_dim=6, n_classes=3):
        super().__init__()
        self.loc = nn.Linear(in_dim, 4)
        self.cl = nn.Linear(in_dim, n_classes)

    def forward(self, features):
        return self.loc(features), self.cl(features)


if __name__ == "__main__":
    torch.manual_seed(0)
    head = SSDHead()
    criterion = MultiBoxLoss()
    n_priors = 10
    features = torch.randn(2, n_priors, 6)
    boxes = torch.rand(2, n_priors, 4)
    labels = torch.zeros(2, n_priors, dtype=torch.long)
    labels[0, 1], labels[1, 4] = 1, 2

    scores = torch.randn(2, n_priors, 3, requires_grad=True)
    loss = criterion(torch.randn(2, n_priors, 4), scores, boxes, labels)
    loss.backward()
    assert scores.grad[0, 1].abs().sum() > 0 and scores.grad[1, 4].abs().sum() > 0  # positives still train

    loss = train_step(head, criterion, torch.optim.SGD(head.parameters(), lr=0.1), features, boxes, labels)
    assert torch.isfinite(loss) and head.cl.weight.grad.abs().sum() > 0
    print("evidence holds: the in-place zeroing hits a clone; conf_loss_all keeps the positive losses for backward")
