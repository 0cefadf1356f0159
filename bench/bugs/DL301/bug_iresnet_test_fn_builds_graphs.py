# source: https://github.com/jhjacobsen/invertible-resnet/issues/15
# category: DL301
# expect: flag 52, 55, 58, 64
# evidence: every forward pass inside test() records an autograd graph (outputs carry grad_fn, inputs require grad) although test() never calls backward.
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Variable

criterion = nn.CrossEntropyLoss()


def line_plot(viz, title, x, y):
    # visdom logging in the original project; a no-op here
    pass


def bits_per_dim(logpx, inputs):
    return -logpx / float(np.log(2.) * np.prod(inputs.shape[1:])) + 8.


class TinyIResNet(nn.Module):
    """Stand-in for the i-ResNet classifier: returns (logits, bijective features)."""

    def __init__(self, in_dim=12, n_classes=4):
        super().__init__()
        self.stack = nn.Sequential(nn.Linear(in_dim, 32), nn.ELU(), nn.Linear(32, in_dim))
        self.head = nn.Linear(in_dim, n_classes)

    def forward(self, x):
        z = x + self.stack(x)
        return self.head(z), z


def train(args, model, optimizer, epoch, trainloader):
    model.train()
    for batch_idx, (inputs, targets) in enumerate(trainloader):
        optimizer.zero_grad()
        inputs, targets = Variable(inputs, requires_grad=True), Variable(targets)
        out, _ = model(inputs)
        loss = criterion(out, targets)
        loss.backward()
        optimizer.step()


def test(best_result, args, model, epoch, testloader, viz, use_cuda, test_log):
    model.eval()
    objective = 0.
    total = 0
    for batch_idx, (inputs, targets) in enumerate(testloader):
        if use_cuda:
            inputs, targets = inputs.cuda(), targets.cuda()
        inputs, targets = Variable(inputs, requires_grad=True), Variable(targets)

        if args.densityEstimation:
            z, logpz, trace = model(inputs)
            logpx = logpz + trace
            loss = bits_per_dim(logpx, inputs)
            objective += -loss.cpu().sum().item()
            del z, logpz, trace, logpx, loss
        else:
            out, out_bij = model(inputs)
            _, predicted = torch.max(out.data, 1)
            objective += predicted.eq(targets.data).sum().item()
            del out, out_bij, _, predicted

        total += targets.size(0)
        del inputs, targets

    objective = float(objective) / float(total)
    line_plot(viz, "test acc", epoch, objective)
    print("| Validation Epoch #%d\t\t\tobjective =  %.4f" % (epoch, objective))
    if objective > best_result:
        best_result = objective
    test_log.append("{} {}".format(epoch, objective))
    return best_result


if __name__ == "__main__":
    torch.manual_seed(0)
    args = SimpleNamespace(densityEstimation=False, lr=0.1, epochs=2)
    model = TinyIResNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    trainloader = [(torch.randn(8, 12), torch.randint(0, 4, (8,))) for _ in range(3)]
    testloader = [(torch.randn(8, 12), torch.randint(0, 4, (8,))) for _ in range(3)]

    seen = []

    def record(module, inp, out):
        logits, _ = out
        seen.append((logits.grad_fn is not None, inp[0].requires_grad))

    model.register_forward_hook(record)

    best_result, test_log = 0., []
    for epoch in range(1, args.epochs + 1):
        train(args, model, optimizer, epoch, trainloader)
        seen.clear()
        best_result = test(best_result, args, model, epoch, testloader, None, False, test_log)
        assert len(seen) == len(testloader)
        assert all(has_graph and inp_req for has_graph, inp_req in seen), seen

    print("evidence holds: test() ran %d forward passes per epoch, each building an autograd graph "
          "(logits.grad_fn set, inputs requires_grad=True) with no backward" % len(testloader))
