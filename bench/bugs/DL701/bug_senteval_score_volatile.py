# source: https://github.com/facebookresearch/SentEval/pull/42
# category: DL701
# expect: flag 101, 103
# evidence: PyTorchClassifier.score() relies on Variable(..., volatile=True) to evaluate without a graph; volatile is ignored in PyTorch >= 0.4, so every dev-batch output carries a grad_fn.
from __future__ import absolute_import, division, unicode_literals

import copy
import warnings

import numpy as np
import torch
from torch import nn
from torch.autograd import Variable

warnings.filterwarnings("ignore", message="volatile was removed")


class PyTorchClassifier(object):
    def __init__(self, inputdim, nclasses, l2reg=0., batch_size=64, seed=1111,
                 cudaEfficient=False):
        # fix seed
        np.random.seed(seed)
        torch.manual_seed(seed)

        self.inputdim = inputdim
        self.nclasses = nclasses
        self.l2reg = l2reg
        self.batch_size = batch_size
        self.cudaEfficient = cudaEfficient

    def prepare_split(self, X, y, validation_data=None, validation_split=None):
        # Preparing validation data
        assert validation_split or validation_data
        if validation_data is not None:
            trainX, trainy = X, y
            devX, devy = validation_data
        else:
            permutation = np.random.permutation(len(X))
            trainidx = permutation[int(validation_split * len(X)):]
            devidx = permutation[0:int(validation_split * len(X))]
            trainX, trainy = X[trainidx], y[trainidx]
            devX, devy = X[devidx], y[devidx]

        trainX = torch.FloatTensor(trainX)
        trainy = torch.LongTensor(trainy)
        devX = torch.FloatTensor(devX)
        devy = torch.LongTensor(devy)

        return trainX, trainy, devX, devy

    def fit(self, X, y, validation_data=None, validation_split=None,
            early_stop=True):
        self.nepoch = 0
        bestaccuracy = -1
        stop_train = False
        early_stop_count = 0

        # Preparing validation data
        trainX, trainy, devX, devy = self.prepare_split(X, y, validation_data,
                                                        validation_split)

        # Training
        while not stop_train and self.nepoch <= self.max_epoch:
            self.trainepoch(trainX, trainy, epoch_size=self.epoch_size)
            accuracy = self.score(devX, devy)
            if accuracy > bestaccuracy:
                bestaccuracy = accuracy
                bestmodel = copy.deepcopy(self.model)
            elif early_stop:
                if early_stop_count >= self.tenacity:
                    stop_train = True
                early_stop_count += 1
        self.model = bestmodel
        return bestaccuracy

    def trainepoch(self, X, y, epoch_size=1):
        self.model.train()
        for _ in range(self.nepoch, self.nepoch + epoch_size):
            permutation = np.random.permutation(len(X))
            all_costs = []
            for i in range(0, len(X), self.batch_size):
                # forward
                idx = torch.LongTensor(permutation[i:i + self.batch_size])
                Xbatch = Variable(X.index_select(0, idx))
                ybatch = Variable(y.index_select(0, idx))
                output = self.model(Xbatch)
                # loss
                loss = self.loss_fn(output, ybatch)
                all_costs.append(loss.data.item())
                # backward
                self.optimizer.zero_grad()
                loss.backward()
                # Update parameters
                self.optimizer.step()
        self.nepoch += epoch_size

    def score(self, devX, devy):
        self.model.eval()
        correct = 0
        for i in range(0, len(devX), self.batch_size):
            Xbatch = Variable(devX[i:i + self.batch_size], volatile=True)
            ybatch = Variable(devy[i:i + self.batch_size], volatile=True)
            output = self.model(Xbatch)
            pred = output.data.max(1)[1]
            correct += pred.long().eq(ybatch.data.long()).sum().item()
        accuracy = 1.0 * correct / len(devX)
        return accuracy


"""
MLP with Pytorch (nhid=0 --> Logistic Regression)
"""


class MLP(PyTorchClassifier):
    def __init__(self, params, inputdim, nclasses, l2reg=0., batch_size=64,
                 seed=1111, cudaEfficient=False):
        super(self.__class__, self).__init__(inputdim, nclasses, l2reg,
                                             batch_size, seed, cudaEfficient)
        self.nhid = 0 if "nhid" not in params else params["nhid"]
        self.tenacity = 5 if "tenacity" not in params else params["tenacity"]
        self.epoch_size = 4 if "epoch_size" not in params else params["epoch_size"]
        self.max_epoch = 200 if "max_epoch" not in params else params["max_epoch"]
        self.batch_size = 64 if "batch_size" not in params else params["batch_size"]

        if params["nhid"] == 0:
            self.model = nn.Sequential(
                nn.Linear(self.inputdim, self.nclasses),
            )
        else:
            self.model = nn.Sequential(
                nn.Linear(self.inputdim, params["nhid"]),
                nn.Sigmoid(),
                nn.Linear(params["nhid"], self.nclasses),
            )

        self.loss_fn = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.Adam(self.model.parameters())
        self.optimizer.param_groups[0]['weight_decay'] = self.l2reg


if __name__ == "__main__":
    X = np.random.randn(96, 10).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64)
    clf = MLP({'nhid': 0, 'max_epoch': 2, 'epoch_size': 1, 'batch_size': 16}, inputdim=10, nclasses=2)
    dev_has_graph = []
    clf.model.register_forward_hook(
        lambda m, i, o: None if m.training else dev_has_graph.append(o.grad_fn is not None))
    acc = clf.fit(X, y, validation_split=0.25)
    assert dev_has_graph and all(dev_has_graph)
    print("evidence holds: volatile=True had no effect, %d dev outputs carried a grad_fn (dev acc %.2f)"
          % (len(dev_has_graph), acc))
