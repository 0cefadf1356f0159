# source: https://github.com/cleverhans-lab/cleverhans/blob/master/tutorials/torch/cifar10_tutorial.py
# category: DL301
# expect: clean
# evidence: the evaluation loop after net.eval() crafts FGM/PGD examples, which needs input gradients (backward inside the attack helpers): the adversarial inputs differ from the clean ones and accuracy drops
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class CNN(torch.nn.Module):
    """Basic CNN architecture."""

    def __init__(self, in_channels=1):
        super(CNN, self).__init__()
        self.conv1 = nn.Conv2d(in_channels, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 8, 3, 2)
        self.fc = nn.Linear(8 * 3 * 3, 2)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = x.view(-1, 8 * 3 * 3)
        return self.fc(x)


def optimize_linear(grad, eps, norm=np.inf):
    assert norm == np.inf
    return eps * torch.sign(grad)


def fast_gradient_method(model_fn, x, eps, norm, clip_min=None, clip_max=None, y=None, targeted=False):
    x = x.clone().detach().to(torch.float).requires_grad_(True)
    if y is None:
        # Using model predictions as ground truth to avoid label leaking
        _, y = torch.max(model_fn(x), 1)
    loss_fn = torch.nn.CrossEntropyLoss()
    loss = loss_fn(model_fn(x), y)
    if targeted:
        loss = -loss
    loss.backward()
    optimal_perturbation = optimize_linear(x.grad, eps, norm)
    adv_x = x + optimal_perturbation
    if (clip_min is not None) or (clip_max is not None):
        adv_x = torch.clamp(adv_x, clip_min, clip_max)
    return adv_x


def projected_gradient_descent(model_fn, x, eps, eps_iter, nb_iter, norm, clip_min=None, clip_max=None):
    eta = torch.zeros_like(x)
    adv_x = x + eta
    _, y = torch.max(model_fn(x), 1)
    for i in range(nb_iter):
        adv_x = fast_gradient_method(model_fn, adv_x, eps_iter, norm, clip_min=clip_min, clip_max=clip_max, y=y)
        eta = torch.clamp(adv_x - x, -eps, eps)
        adv_x = (x + eta).detach()
    return adv_x


def main(FLAGS, data):
    net = CNN(in_channels=1)
    device = 'cpu'
    loss_fn = torch.nn.CrossEntropyLoss(reduction='mean')
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)

    # Train vanilla model
    net.train()
    for epoch in range(1, FLAGS.nb_epochs + 1):
        train_loss = 0.
        for x, y in data.train:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = loss_fn(net(x), y)
            loss.backward()
            optimizer.step()
            train_loss += loss.item()
        print('epoch: {}/{}, train loss: {:.3f}'.format(epoch, FLAGS.nb_epochs, train_loss))

    # Evaluate on clean and adversarial data
    net.eval()
    report = SimpleNamespace(nb_test=0, correct=0, correct_fgm=0, correct_pgd=0, perturbation=0.0)
    for x, y in data.test:
        x, y = x.to(device), y.to(device)
        x_fgm = fast_gradient_method(net, x, FLAGS.eps, np.inf)
        x_pgd = projected_gradient_descent(net, x, FLAGS.eps, 0.05, 5, np.inf)
        _, y_pred = net(x).max(1)  # model prediction on clean examples
        _, y_pred_fgm = net(x_fgm).max(1)  # model prediction on FGM adversarial examples
        _, y_pred_pgd = net(x_pgd).max(1)  # model prediction on PGD adversarial examples
        report.nb_test += y.size(0)
        report.correct += y_pred.eq(y).sum().item()
        report.correct_fgm += y_pred_fgm.eq(y).sum().item()
        report.correct_pgd += y_pred_pgd.eq(y).sum().item()
        report.perturbation += (x_fgm - x).abs().max().item()
    print('test acc clean {:.1f}%, FGM {:.1f}%, PGD {:.1f}%'.format(
        report.correct / report.nb_test * 100., report.correct_fgm / report.nb_test * 100.,
        report.correct_pgd / report.nb_test * 100.))
    return report


def make_split(n_batches, seed):
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n_batches):
        y = torch.randint(0, 2, (16,), generator=g)
        x = torch.rand(16, 1, 9, 9, generator=g) * 0.5 + y.view(-1, 1, 1, 1) * 0.3
        batches.append((x, y))
    return batches


if __name__ == '__main__':
    torch.manual_seed(0)
    FLAGS = SimpleNamespace(nb_epochs=5, eps=0.3)
    data = SimpleNamespace(train=make_split(8, 1), test=make_split(2, 2))
    report = main(FLAGS, data)
    assert report.perturbation > 0
    assert report.correct_fgm < report.correct and report.correct_pgd < report.correct
    print("evidence holds: the attacks needed input gradients and cut accuracy from %d to %d/%d (FGM)"
          % (report.correct, report.correct_fgm, report.nb_test))
