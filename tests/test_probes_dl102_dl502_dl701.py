"""Probes decided on what the program itself gives the code: a `Variable`
around a batch of the script's own data source (DL701), a `.data.resize_`
helper run through the script's own training call that reads a batch with
`next(iter(...))` (DL102), and a fill of a weight the file's own class
passes in its constructor (DL502). A function's made-up argument still
leaves the verdict to the callers.

The session's one worker serves the file (torch loads once).
"""

from __future__ import annotations

import pytest
from conftest import line_of as _line
from conftest import verifications_by_line as _verdicts

pytest.importorskip("torch")  # the verifier's extra; CI installs it with [dev]


# A 2017-style script: the loaders come from a helper that reads files, and
# every batch is wrapped in `Variable` before the model sees it.
MNIST_SCRIPT = """
    import torch
    from torch import nn
    import torch.nn.functional as F
    from torch.autograd import Variable

    from mnist_files import read_mnist


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 8, 3, padding=1)
            self.fc = nn.Linear(8 * 14 * 14, 10)

        def forward(self, x):
            x = F.max_pool2d(F.relu(self.conv(x)), 2)
            return F.log_softmax(self.fc(x.flatten(1)), dim=1)


    train_data, eval_data = read_mnist(64)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(3):
        model.train()
        for images, labels in train_data:
            images_v, labels_v = Variable(images.float()), Variable(labels)
            optimizer.zero_grad()
            loss = F.nll_loss(model(images_v), labels_v)
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            for images, labels in eval_data:
                correct = (model(images).argmax(1) == labels).sum().item()
"""


def test_dl701_variable_around_a_batch_of_the_scripts_data_source_is_confirmed(verifier, tmp_path):
    verdicts = _verdicts(verifier, tmp_path, "mnist_script.py", MNIST_SCRIPT, "DL701")
    line = _line(MNIST_SCRIPT, "images_v, labels_v = Variable(")
    assert len(verdicts[line]) == 2
    for verification in verdicts[line]:
        assert verification.status == "confirmed" and verification.basis == "user-code", verification
        # The batch came from `train_data` (the first of the unpacked sources), named as such.
        assert "a batch of the script's data source `train_data`" in verification.evidence
        assert "synthesized batches for `train_data`" in verification.evidence
        assert "the same data with nothing changed" in verification.evidence


# A function that reads the module's loader (built from files) as a global.
GLOBAL_LOADER = """
    import torch
    from torch import nn, optim
    import torch.nn.functional as F
    from torch.autograd import Variable

    from cifar_files import read_cifar10


    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3 * 32 * 32, 10)

        def forward(self, x):
            return self.fc(x.flatten(1))


    train_loader = read_cifar10(128)
    model = Classifier()


    def train(epoch):
        model.train()
        optimizer = optim.SGD(model.parameters(), lr=0.1)
        for batch_idx, (data, target) in enumerate(train_loader):
            data = Variable(data)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(data), target)
            loss.backward()
            optimizer.step()
"""


def test_dl701_variable_around_a_batch_of_a_module_level_loader_is_confirmed(verifier, tmp_path):
    verdicts = _verdicts(verifier, tmp_path, "global_loader.py", GLOBAL_LOADER, "DL701")
    (verification,) = verdicts[_line(GLOBAL_LOADER, "data = Variable(data)")]
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    assert "a batch of the script's data source `train_loader`" in verification.evidence


# The same wrapper in a function whose loader is an argument: the verifier
# made the loader up, so what the callers pass decides.
MNIST_FUNCTION = """
    import torch
    from torch import nn
    import torch.nn.functional as F
    from torch.autograd import Variable


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(784, 10)

        def forward(self, x):
            return F.log_softmax(self.fc(x.flatten(1)), dim=1)


    def train_epoch(model, loader, optimizer):
        model.train()
        for images, labels in loader:
            images = Variable(images)
            optimizer.zero_grad()
            loss = F.nll_loss(model(images), labels)
            loss.backward()
            optimizer.step()
"""


def test_dl701_variable_around_a_made_up_argument_stays_inconclusive(verifier, tmp_path):
    verdicts = _verdicts(verifier, tmp_path, "mnist_function.py", MNIST_FUNCTION, "DL701")
    (verification,) = verdicts[_line(MNIST_FUNCTION, "images = Variable(images)")]
    assert verification.status == "inconclusive", verification
    assert "the file's callers decide" in verification.evidence


# A CRNN-style placeholder filled by `.data.resize_`: the training step reads
# its batch with `next(iter(...))`, which the script builds.
PLACEHOLDER_SCRIPT = """
    import torch
    from torch import nn


    class Recognizer(nn.Module):
        def __init__(self, channels=1, classes=11):
            super().__init__()
            self.conv = nn.Conv2d(channels, 8, 3, padding=1)
            self.head = nn.Linear(8, classes)

        def forward(self, x):
            return self.head(self.conv(x).mean((2, 3)))


    image = torch.FloatTensor(4, 3, 32, 32)


    def load_data(v, data):
        v.data.resize_(data.size()).copy_(data)


    def train_batch(net, criterion, optimizer, train_iter):
        images, labels = next(train_iter)
        load_data(image, images)
        loss = criterion(net(image), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss


    if __name__ == "__main__":
        net = Recognizer()
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
        batch = (torch.rand(4, 1, 32, 100), torch.randint(0, 11, (4,)))
        train_iter = iter([batch])
        train_batch(net, nn.CrossEntropyLoss(), optimizer, train_iter)
"""


def test_dl102_resize_through_the_scripts_call_that_builds_an_iterator(verifier, tmp_path):
    verdicts = _verdicts(verifier, tmp_path, "placeholder.py", PLACEHOLDER_SCRIPT, "DL102")
    (verification,) = verdicts[_line(PLACEHOLDER_SCRIPT, "v.data.resize_(")]
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    assert "resized to [4, 1, 32, 100], while `v` kept its shape [4, 3, 32, 32]" in verification.evidence


# A sinusoidal table written into an embedding's weight by a helper the
# module's constructor calls: the constructor passes the leaf parameter.
EMBEDDINGS = """
    import math

    import torch
    from torch import nn


    def fill_sinusoids(n_pos, dim, table):
        position = torch.arange(n_pos).unsqueeze(1).float()
        scale = torch.exp(torch.arange(0, dim, 2).float() * (-math.log(10000.0) / dim))
        table[:, 0::2] = torch.sin(position * scale)
        table.requires_grad = False


    class PositionalEmbedding(nn.Module):
        def __init__(self, max_len, d_model):
            super().__init__()
            self.pos = nn.Embedding(max_len, d_model)
            fill_sinusoids(max_len, d_model, self.pos.weight)

        def forward(self, tokens):
            positions = torch.arange(tokens.size(1)).unsqueeze(0)
            return tokens.unsqueeze(-1) + self.pos(positions)
"""


def test_dl502_helper_run_through_the_class_that_passes_its_weight(verifier, tmp_path):
    verdicts = _verdicts(verifier, tmp_path, "embeddings.py", EMBEDDINGS, "DL502")
    (verification,) = verdicts[_line(EMBEDDINGS, "table[:, 0::2] =")]
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    assert "in-place operation" in verification.evidence
    assert "run through `PositionalEmbedding.__init__`, which calls `fill_sinusoids`" in verification.evidence



# Two classes call the helper: the first by name fills its table under
# `no_grad` and runs through, which refutes nothing; the other raises.
EMBEDDINGS_TWO_CALLERS = EMBEDDINGS + """

    class AbsolutePositions(nn.Module):
        def __init__(self, max_len, d_model):
            super().__init__()
            self.table = nn.Parameter(torch.empty(max_len, d_model))
            with torch.no_grad():
                fill_sinusoids(max_len, d_model, self.table)

        def forward(self, x):
            return x + self.table[: x.size(1)]
"""


def test_dl502_a_class_whose_call_runs_through_refutes_nothing(verifier, tmp_path):
    verdicts = _verdicts(verifier, tmp_path, "embeddings_two.py", EMBEDDINGS_TWO_CALLERS, "DL502")
    (verification,) = verdicts[_line(EMBEDDINGS_TWO_CALLERS, "table[:, 0::2] =")]
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    assert "run through `PositionalEmbedding.__init__`" in verification.evidence
