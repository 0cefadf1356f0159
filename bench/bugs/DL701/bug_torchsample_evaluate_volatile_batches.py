# source: https://github.com/nitrain/nitrain/issues/89
# category: DL701
# expect: flag 23, 24, 71, 72, 74
# evidence: evaluate() asks for volatile batches, but volatile is ignored: every validation forward pass builds an autograd graph (outputs carry grad_fn)
import math
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


class SingleInput_SingleTarget_Helper(object):
    def move_to_cuda(self, cuda_device, inputs, targets):
        return inputs.cuda(cuda_device), targets.cuda(cuda_device)

    def shuffle_arrays(self, inputs, targets):
        rand_indices = torch.randperm(len(inputs))
        return inputs[rand_indices], targets[rand_indices]

    def grab_batch(self, batch_idx, batch_size, inputs, targets, volatile=False):
        input_batch = Variable(inputs[batch_idx * batch_size:(batch_idx + 1) * batch_size], volatile=volatile)
        target_batch = Variable(targets[batch_idx * batch_size:(batch_idx + 1) * batch_size], volatile=volatile, requires_grad=False)
        return input_batch, target_batch

    def forward_pass(self, input_batch, model):
        return model(input_batch)

    def calculate_loss(self, output_batch, target_batch, loss_fn):
        return loss_fn(output_batch, target_batch)


class ModuleTrainer(object):
    def __init__(self, model):
        self.model = model
        self._loss_fn = None
        self._optimizer = None

    def compile(self, optimizer, loss):
        self._optimizer = optimizer(self.model.parameters())
        self._loss_fn = loss

    def fit(self, inputs, targets, num_epoch=1, batch_size=4):
        self.model.train(mode=True)
        helper = SingleInput_SingleTarget_Helper()
        num_batches = int(math.ceil(len(inputs) / batch_size))
        for epoch_idx in range(num_epoch):
            inputs, targets = helper.shuffle_arrays(inputs, targets)
            for batch_idx in range(num_batches):
                input_batch, target_batch = helper.grab_batch(batch_idx, batch_size, inputs, targets)
                self._optimizer.zero_grad()
                output_batch = helper.forward_pass(input_batch, self.model)
                loss = helper.calculate_loss(output_batch, target_batch, self._loss_fn)
                loss.backward()
                self._optimizer.step()

    def evaluate(self, inputs, targets=None, batch_size=4, cuda_device=-1, verbose=1):
        self.model.train(mode=False)
        len_inputs = len(inputs)
        num_batches = int(math.ceil(len_inputs / batch_size))

        evaluate_helper = SingleInput_SingleTarget_Helper()
        eval_logs = {'val_loss': 0.}
        loss_fn = self._loss_fn

        if cuda_device >= 0:
            inputs, targets = evaluate_helper.move_to_cuda(cuda_device, inputs, targets)

        samples_seen = 0
        for batch_idx in range(num_batches):
            input_batch, target_batch = evaluate_helper.grab_batch(batch_idx, batch_size, inputs, targets, volatile=True)
            self._optimizer.zero_grad()
            output_batch = evaluate_helper.forward_pass(input_batch, self.model)
            loss = evaluate_helper.calculate_loss(output_batch, target_batch, loss_fn)
            samples_seen += batch_size
            eval_logs['val_loss'] = (samples_seen * eval_logs['val_loss'] + loss.item() * batch_size) / (samples_seen + batch_size)

        self.model.train(mode=True)
        return eval_logs


class Network(nn.Module):
    def __init__(self):
        super(Network, self).__init__()
        self.conv1 = nn.Conv2d(1, 4, kernel_size=3)
        self.fc1 = nn.Linear(4 * 3 * 3, 3)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        return F.log_softmax(self.fc1(x.view(x.size(0), -1)), dim=-1)


if __name__ == "__main__":
    torch.manual_seed(0)
    x_train, y_train = torch.randn(16, 1, 8, 8), torch.randint(0, 3, (16,))
    x_test, y_test = torch.randn(8, 1, 8, 8), torch.randint(0, 3, (8,))

    model = Network()
    trainer = ModuleTrainer(model)
    trainer.compile(optimizer=lambda p: torch.optim.Adadelta(p), loss=F.nll_loss)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(x_train, y_train, num_epoch=1, batch_size=4)
        graphs = []
        handle = model.register_forward_hook(lambda m, inp, out: graphs.append(out.grad_fn is not None))
        logs = trainer.evaluate(x_test, y_test, batch_size=4)
        handle.remove()

    assert any("volatile was removed" in str(w.message) for w in caught)
    assert graphs == [True, True]  # both validation batches recorded a backward graph
    assert logs['val_loss'] > 0
    print("evidence holds: evaluate() relied on volatile=True and builds a graph for every validation batch")
