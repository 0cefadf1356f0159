# source: https://github.com/BatsResearch/labelmodels/issues/4
# category: DL401
# expect: flag 47
# evidence: running_loss is a tensor with a grad_fn after each epoch, and the autograd graph reachable from it grows with every batch (every batch's graph is kept alive)
import logging

import numpy as np
import torch
import torch.nn as nn


class LabelModel(nn.Module):
    """Parent class for generative label models."""

    def forward(self, *args):
        raise NotImplementedError

    def _get_regularization_loss(self):
        return 0.0

    def _do_estimate_label_model(self, batches, config):
        """Internal method for optimizing model parameters."""
        logging.info(vars(config))

        optimizer = torch.optim.SGD(
            self.parameters(), lr=config.step_size, momentum=config.momentum, weight_decay=0)
        if config.step_schedule is not None and config.step_size_mult is not None:
            scheduler = torch.optim.lr_scheduler.MultiStepLR(
                optimizer, config.step_schedule, gamma=config.step_size_mult)
        else:
            scheduler = None

        epoch_loss = None
        for epoch in range(config.epochs):
            logging.info('Epoch {}/{}'.format(epoch + 1, config.epochs))

            self.train()
            running_loss = 0.0

            for i_batch, inputs in enumerate(batches):
                optimizer.zero_grad()
                log_likelihood = self(*inputs)
                loss = -1 * torch.mean(log_likelihood)
                loss += self._get_regularization_loss()
                loss.backward()
                optimizer.step()
                running_loss += loss
            if scheduler is not None:
                scheduler.step()
            epoch_loss = running_loss / len(batches)
            logging.info('Train Loss: %.6f', epoch_loss)
        return epoch_loss


class NaiveBayes(LabelModel):
    """Labeling functions are conditionally independent given the true label."""

    def __init__(self, num_classes, num_lfs, init_acc=0.9, acc_prior=0.025):
        super().__init__()
        init_acc = -1 * np.log(1.0 / init_acc - 1) / 2
        self.accuracy = nn.Parameter(torch.full((num_lfs, num_classes), float(init_acc)))
        self.propensity = nn.Parameter(torch.zeros(num_lfs))
        self.class_balance = nn.Parameter(torch.zeros(num_classes))
        self.num_classes, self.num_lfs = num_classes, num_lfs
        self.init_acc, self.acc_prior = init_acc, acc_prior

    def forward(self, votes):
        # votes: m x n in {0 (abstain), 1..k}
        z_acc = torch.logsumexp(torch.stack((self.accuracy, -self.accuracy), dim=2), dim=2)
        z_prop = torch.logsumexp(torch.stack((self.propensity, torch.zeros(self.num_lfs)), dim=1), dim=1)
        cll = torch.zeros(votes.shape[0], self.num_classes) - z_prop.sum()
        for k in range(self.num_classes):
            correct = (votes == k + 1).float()
            wrong = ((votes != 0) & (votes != k + 1)).float()
            right_lp = self.propensity + self.accuracy[:, k] - z_acc[:, k]
            wrong_lp = self.propensity - self.accuracy[:, k] - z_acc[:, k] - np.log(self.num_classes - 1.0)
            cll[:, k] = cll[:, k] + correct @ right_lp + wrong @ wrong_lp
        return torch.logsumexp(cll + torch.log_softmax(self.class_balance, 0), dim=1)

    def _get_regularization_loss(self):
        return self.acc_prior * torch.norm(self.accuracy - self.init_acc)

    def estimate_label_model(self, votes, config):
        batches = [(votes[i:i + config.batch_size],) for i in range(0, len(votes), config.batch_size)]
        return self._do_estimate_label_model(batches, config)


class LearningConfig(object):
    def __init__(self):
        self.epochs = 1
        self.batch_size = 8
        self.step_size = 0.01
        self.step_schedule = None
        self.step_size_mult = None
        self.momentum = 0.9


def graph_nodes(t):
    seen, stack = set(), [t.grad_fn]
    while stack:
        fn = stack.pop()
        if fn is not None and fn not in seen:
            seen.add(fn)
            stack.extend(next_fn for next_fn, _ in fn.next_functions)
    return len(seen)


if __name__ == "__main__":
    torch.manual_seed(0)
    votes = torch.randint(0, 3, (48, 4))
    config = LearningConfig()

    sizes = []
    for n_rows in (16, 32, 48):
        model = NaiveBayes(num_classes=2, num_lfs=4)
        epoch_loss = model.estimate_label_model(votes[:n_rows], config)
        assert epoch_loss.grad_fn is not None
        sizes.append(graph_nodes(epoch_loss))

    assert sizes[0] < sizes[1] < sizes[2], sizes
    print("evidence holds: running_loss keeps every batch's graph: %s graph nodes for 2/4/6 batches" % sizes)
