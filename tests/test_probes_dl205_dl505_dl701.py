"""The probes of DL205 (`detach_()` on a view or a shared tensor), DL505
(`requires_grad` forced on a cut loss) and DL701 (`Variable(...)`) against
real torch: each message kind confirmed on the user's code, look-alikes
refuted or left unconfirmed.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from conftest import line_of, rule_codes

from detachlint.engine import lint_source
from detachlint.registry import load_rules
from detachlint.verify import Verifier, VerifyOptions

pytest.importorskip("torch")

RULES = load_rules()


@pytest.fixture(scope="module")
def verifier(tmp_path_factory):
    verifier = Verifier(VerifyOptions(timeout=10.0))
    verifier.start([str(tmp_path_factory.getbasetemp())])
    yield verifier
    verifier.close()


def _verdicts(verifier, tmp_path, code, source):
    """{line: verification} of the rule's findings in `source`."""
    path = tmp_path / f"{code.lower()}_case.py"
    path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
    findings = lint_source(path.read_bytes(), str(path), [RULES[c] for c in rule_codes(code)]).findings
    assert findings, f"{code} found nothing"
    verified = verifier.verify(findings, lambda display: Path(display).read_text(encoding="utf-8"))
    return {f.line: f.verification for f in verified}


def _confirmed(verification):
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    return verification.evidence


# ---------------------------------------------------------------------------
# DL205


DL205_SHARED = """
    import torch
    from torch import nn
    import torch.nn.functional as F


    class Encoder(nn.Module):
        def __init__(self, d=32, classes=4):
            super().__init__()
            self.body = nn.Linear(d, d)
            self.head = nn.Linear(d, classes)

        def forward(self, x):
            h = F.relu(self.body(x))
            features = h
            h.detach_()
            return self.head(features), h
    """


def test_dl205_shared_tensor_cut_is_confirmed(verifier, tmp_path):
    evidence = _confirmed(_verdicts(verifier, tmp_path, "DL205", DL205_SHARED)[15])
    assert "`h` just before the call: requires_grad=True, grad_fn=ReluBackward0" in evidence
    assert "`features` held the same tensor with requires_grad=False, grad_fn=None" in evidence
    assert "`body.weight`, `body.bias` upstream of `h` got no gradient" in evidence


DL205_VIEWS = """
    import torch
    from torch import nn


    class LastStep(nn.Module):
        def __init__(self, d=8, classes=3):
            super().__init__()
            self.rnn = nn.GRU(d, d, batch_first=True)
            self.fc = nn.Linear(d, classes)

        def forward(self, x):
            out, _ = self.rnn(x)
            last = out[:, -1]
            last.detach_()
            return self.fc(last)


    class PatchHead(nn.Module):
        def __init__(self, c=8):
            super().__init__()
            self.conv = nn.Conv2d(c, c, 3, padding=1)
            self.fc = nn.Linear(c * 16, 10)

        def forward(self, x):
            y = self.conv(x)
            flat = y.transpose(1, 3).reshape(y.shape[0], -1)
            flat.detach_()
            return self.fc(flat)
    """


def test_dl205_view_raises_and_a_copying_reshape_is_refuted(verifier, tmp_path):
    verdicts = _verdicts(verifier, tmp_path, "DL205", DL205_VIEWS)
    evidence = _confirmed(verdicts[14])
    assert "`last` was a view of another tensor" in evidence
    assert "raised RuntimeError: Can't detach views in-place" in evidence
    # `reshape` after `transpose` copies: no view, and the call runs.
    refuted = verdicts[27]
    assert refuted.status == "refuted" and refuted.basis == "user-code", refuted
    assert "`flat` was no view when the line ran" in refuted.evidence and "ran without raising" in refuted.evidence


DL205_STATE_ROWS = """
    import torch
    from torch import nn
    from torch.nn import functional as F


    class RNNModel(nn.Module):
        def __init__(self, rnn_layer, vocab_size):
            super().__init__()
            self.rnn = rnn_layer
            self.vocab_size = vocab_size
            self.linear = nn.Linear(self.rnn.hidden_size, vocab_size)

        def forward(self, inputs, state):
            X = F.one_hot(inputs.T.long(), self.vocab_size).to(torch.float32)
            Y, state = self.rnn(X, state)
            return self.linear(Y.reshape((-1, Y.shape[-1]))), state

        def begin_state(self, batch_size):
            shape = (self.rnn.num_layers, batch_size, self.rnn.hidden_size)
            if not isinstance(self.rnn, nn.LSTM):
                return torch.zeros(shape)
            return torch.zeros(shape), torch.zeros(shape)


    def train_epoch(net, train_iter, loss, updater):
        state = None
        for X, Y in train_iter:
            if state is None:
                state = net.begin_state(batch_size=X.shape[0])
            else:
                for s in state:
                    s.detach_()
            y_hat, state = net(X, state)
            l = loss(y_hat, Y.T.reshape(-1).long()).mean()
            updater.zero_grad()
            l.backward()
            updater.step()


    if __name__ == "__main__":
        vocab_size, batch_size, num_steps = 7, 2, 5
        net = RNNModel(nn.{layer}(vocab_size, 8), vocab_size)
        batches = [(torch.randint(0, vocab_size, (batch_size, num_steps)),) * 2 for _ in range(3)]
        train_epoch(net, batches, nn.CrossEntropyLoss(reduction="none"), torch.optim.SGD(net.parameters(), lr=0.1))
    """


def test_dl205_rows_of_one_state_tensor_raise_and_an_lstm_tuple_is_not_confirmed(verifier, tmp_path):
    evidence = _confirmed(_verdicts(verifier, tmp_path, "DL205", DL205_STATE_ROWS.replace("{layer}", "GRU"))[32])
    assert "`state` held one tensor of shape (1, 2, 8); its row `s` was a view" in evidence
    assert "raised RuntimeError: Can't detach views in-place" in evidence
    # The same loop over an LSTM's (h, c): whole tensors, the finding's case does not arise.
    verification = _verdicts(verifier, tmp_path, "DL205", DL205_STATE_ROWS.replace("{layer}", "LSTM"))[32]
    assert verification.status == "inconclusive", verification
    assert "`state` held a tuple of 2 at these inputs" in verification.evidence


def test_dl205_cut_finding_on_a_view_is_not_confirmed(verifier, tmp_path):
    source = """
        from torch import nn


        class Tagger(nn.Module):
            def __init__(self, vocab=100, d=16):
                super().__init__()
                self.embed = nn.Embedding(vocab, d)
                self.proj = nn.Linear(d, 5)

            def forward(self, tokens):
                h = self.proj(self.embed(tokens))
                logits = h
                h.detach_()
                return logits, h
        """
    verification = _verdicts(verifier, tmp_path, "DL205", source)[13]
    # `Linear` on a (batch, time, d) input returns a view: the call raises, it cuts nothing silently.
    assert verification.status == "inconclusive", verification
    assert "itself raised RuntimeError: Can't detach views in-place" in verification.evidence


# ---------------------------------------------------------------------------
# DL505


DL505_STEPS = """
    import torch
    from torch import nn
    import torch.nn.functional as F


    class Regressor(nn.Module):
        def __init__(self, d=16):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(d, 32), nn.ReLU(), nn.Linear(32, 1))

        def forward(self, x):
            return self.net(x)


    def train_step(model: Regressor, x, y, optimizer):
        pred = model(x).detach()
        loss = F.mse_loss(pred, y)
        loss.requires_grad = True
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()


    def train_step_forced(model: Regressor, x, y, optimizer):
        loss = F.mse_loss(model(x), y)
        loss.requires_grad_()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()


    def train_step_flag(model: Regressor, x, y, optimizer):
        loss = F.mse_loss(model(x), y)
        loss.requires_grad = True
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """


def test_dl505_cut_loss_is_confirmed_and_a_loss_with_its_graph_refuted(verifier, tmp_path):
    verdicts = _verdicts(verifier, tmp_path, "DL505", DL505_STEPS)
    evidence = _confirmed(verdicts[18])
    assert "`loss` just before the statement: requires_grad=False, grad_fn=None, and with the synthesized inputs requiring grad its graph (grad_fn=MseLossBackward0) reaches no parameter" in evidence
    assert "the backward on line 20 ran from it and reached no parameter; the 4 parameters of the modules the run called kept grad None" in evidence
    # `requires_grad_()` on a loss that has its graph: a no-op.
    assert verdicts[27].status == "refuted" and verdicts[27].basis == "user-code", verdicts[27]
    assert "grad_fn=MseLossBackward0: it kept its graph" in verdicts[27].evidence
    # The attribute on a non-leaf raises: nothing is hidden.
    assert verdicts[36].status == "refuted", verdicts[36]
    assert "raised RuntimeError: you can only change requires_grad flags of leaf variables" in verdicts[36].evidence


def test_dl505_variable_wrapper_cuts_even_a_loss_with_its_graph(verifier, tmp_path):
    source = """
        import torch
        from torch import nn
        import torch.nn.functional as F
        from torch.autograd import Variable


        class Regressor(nn.Module):
            def __init__(self, d=16):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(d, 32), nn.ReLU(), nn.Linear(32, 1))

            def forward(self, x):
                return self.net(x)


        def fit(model: Regressor, batches, optimizer):
            for x, y in batches:
                loss = F.mse_loss(model(x), y)
                loss = Variable(loss, requires_grad=True)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        """
    evidence = _confirmed(_verdicts(verifier, tmp_path, "DL505", source)[19])
    assert "requires_grad=True, grad_fn=MseLossBackward0; the statement made `loss` a new leaf (grad_fn=None), cut from that graph" in evidence
    assert "the backward on line 21 ran from it and reached no parameter" in evidence


def test_dl505_numpy_round_trip_is_confirmed(verifier, tmp_path):
    source = """
        import numpy as np
        import torch


        def a2c_update(policy_optimiser, samples, value_weight=0.5):
            log_probs = torch.from_numpy(np.stack(samples["log_probs"]))
            advantages = torch.from_numpy(np.stack(samples["advantages"]))
            policy_loss = -(log_probs * advantages).mean()
            loss = policy_loss + value_weight * advantages.pow(2).mean()
            policy_optimiser.zero_grad()
            loss.requires_grad = True
            loss.backward()
            policy_optimiser.step()
        """
    evidence = _confirmed(_verdicts(verifier, tmp_path, "DL505", source)[11])
    assert "requires_grad=False, grad_fn=None" in evidence
    assert "raised RuntimeError: Can't call numpy() on Tensor that requires grad" in evidence
    assert "the backward on line 12 ran from it and reached no parameter" in evidence


# ---------------------------------------------------------------------------
# DL701


DL701_CLASSIFIER = """
    import torch
    from torch import nn
    import torch.nn.functional as F
    from torch.autograd import Variable


    class Classifier(nn.Module):
        def __init__(self, d=20, classes=5):
            super().__init__()
            self.fc1 = nn.Linear(d, 64)
            self.fc2 = nn.Linear(64, classes)

        def forward(self, x):
            return self.fc2(F.relu(self.fc1(x)))


    def evaluate(model: Classifier, loader):
        model.eval()
        correct = 0
        for images, labels in loader:
            images = Variable(images, volatile=True)
            outputs = model(images)
            correct += (outputs.argmax(1) == labels).sum().item()
        return correct


    def evaluate_no_grad(model: Classifier, loader):
        model.eval()
        correct = 0
        with torch.no_grad():
            for images, labels in loader:
                images = Variable(images, volatile=True)
                outputs = model(images)
                correct += (outputs.argmax(1) == labels).sum().item()
        return correct


    def train(model: Classifier, loader, optimizer):
        for x, y in loader:
            x, y = Variable(x), Variable(y)
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


    def perturb(model: Classifier, images, labels, eps=0.03):
        delta = Variable(torch.zeros_like(images), requires_grad=True)
        loss = F.cross_entropy(model(images + delta), labels)
        loss.backward()
        return (images + eps * delta.grad.sign()).detach()


    def add_noise(images, std=0.1):
        noise = Variable(torch.randn(images.size())) * std
        return images + noise
    """


def test_dl701_volatile_does_nothing_and_new_leaf_are_confirmed(verifier, tmp_path):
    verdicts = _verdicts(verifier, tmp_path, "DL701", DL701_CLASSIFIER)
    evidence = _confirmed(verdicts[21])
    assert 'warned "volatile was removed and now has no effect' in evidence
    assert "autograd was on at the line, and the next module call (`Classifier`) returned requires_grad=True" in evidence
    # Under `torch.no_grad()` the keyword changes nothing: DL702 says so, and the run agrees.
    assert verdicts[32].status == "confirmed", verdicts[32]
    assert "autograd was off when `Variable(" in verdicts[32].evidence
    evidence = _confirmed(verdicts[48])
    assert "returned a new tensor sharing its storage (is_leaf=True, requires_grad=True)" in evidence
    evidence = _confirmed(verdicts[55])
    assert "`torch.randn(images.size())`: requires_grad=False, grad_fn=None" in evidence
    assert "sharing its storage" in evidence and "nothing changed" in evidence
    # A batch the reproduction made up: what `Variable` does to it is torch's behaviour, not the program's.
    assert verdicts[40].status == "inconclusive", verdicts[40]
    assert "holds data the reproduction synthesized" in verdicts[40].evidence


def test_dl701_cut_of_a_generated_image_is_confirmed(verifier, tmp_path):
    source = """
        import torch
        from torch import nn
        from torch.autograd import Variable


        class Generator(nn.Module):
            def __init__(self, nz=8, d=20):
                super().__init__()
                self.main = nn.Sequential(nn.Linear(nz, 32), nn.ReLU(), nn.Linear(32, d))

            def forward(self, z):
                return self.main(z)


        def generator_step(G: Generator, D: nn.Module, z, g_optimizer):
            fake = G(z)
            d_in = Variable(fake)
            g_loss = -D(d_in).mean()
            g_optimizer.zero_grad()
            g_loss.backward()
            g_optimizer.step()
        """
    verification = _verdicts(verifier, tmp_path, "DL701", source)[17]
    # `D` is a stand-in (no class of the file fits it): the cut is shown, on a stand-in.
    assert verification.status in ("confirmed", "plausible"), verification
    assert "`fake`: requires_grad=True, grad_fn=AddmmBackward0" in verification.evidence
    assert "no gradient flows back through it into `fake`" in verification.evidence


def test_dl701_argument_of_unknown_graph_is_not_confirmed(verifier, tmp_path):
    source = """
        from torch.autograd import Variable


        def wrap(t):
            return Variable(t)
        """
    verification = _verdicts(verifier, tmp_path, "DL701", source)[5]
    assert verification.status == "inconclusive", verification
    assert "holds data the reproduction synthesized" in verification.evidence


DL701_COMPUTED = """
    import torch
    from torch import nn
    from torch.autograd import Variable


    class Decoder(nn.Module):
        def __init__(self, dim=6):
            super().__init__()
            self.dim = dim
            self.cell = nn.LSTMCell(dim, dim)

        def initial_state(self, memory):
            batch = memory.size(0)
            hidden = Variable(memory.data.new(batch, self.dim).zero_())
            scaled = Variable(memory * 2)
            return hidden, scaled
    """


def test_dl701_detach_of_a_value_the_code_computes_without_graph_is_confirmed(verifier, tmp_path):
    verdicts = _verdicts(verifier, tmp_path, "DL701", DL701_COMPUTED)
    hidden = verdicts[line_of(DL701_COMPUTED, "hidden = Variable")]
    # A fresh tensor from `.data.new(...)`: no graph, even with every input requiring grad.
    assert hidden.status == "confirmed" and hidden.basis == "user-code", hidden
    assert "also with the run's 1 made-up input requiring grad" in hidden.evidence
    assert "returned a new tensor sharing its storage (is_leaf=True, requires_grad=False)" in hidden.evidence
    # `memory * 2` carries a graph whenever the caller's `memory` does: the callers decide.
    scaled = verdicts[line_of(DL701_COMPUTED, "scaled = Variable")]
    assert scaled.status == "inconclusive", scaled


# A function of a script that reads module-level globals: a model loaded from a
# file (a stand-in in the reproduction) and a loader over files (synthesized batches).
DL701_SCRIPT_GLOBALS = """
    import argparse

    import torch
    from torch import nn
    from torch.autograd import Variable
    from torch.utils.data import DataLoader, Dataset

    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset_name", default="facades")
    opt = parser.parse_args()


    class ImageFolderPairs(Dataset):
        def __init__(self, root):
            self.files = sorted(open(root + "/index.txt").read().split())

        def __getitem__(self, index):
            return {"A": torch.load(self.files[index]), "B": torch.load(self.files[index] + ".b")}

        def __len__(self):
            return len(self.files)


    encoder = torch.load("encoder.pth")
    val_dataloader = DataLoader(ImageFolderPairs("data/%s" % opt.dataset_name), batch_size=5, shuffle=True)
    Tensor = torch.FloatTensor


    def sample_images(batches_done):
        imgs = next(iter(val_dataloader))
        real_a = Variable(imgs["A"].type(Tensor))
        latent = Variable(encoder(real_a))
        return latent"""


def test_dl701_batch_of_the_data_source_rests_on_the_users_code_beside_a_stand_in(verifier, tmp_path):
    verdicts = _verdicts(verifier, tmp_path, "DL701", DL701_SCRIPT_GLOBALS)
    batch = verdicts[line_of(DL701_SCRIPT_GLOBALS, "real_a = Variable")]
    # The stand-in `encoder` computed none of the batch: the verdict is the user's code's.
    assert (batch.status, batch.basis) == ("confirmed", "user-code"), batch
    assert "stand-ins for the script variables `encoder`" in batch.evidence
    assert "holds a batch of the script's data source `val_dataloader` itself (the same storage), which no stand-in computed" in batch.evidence
    # The stand-in's own output is what the next wrapper cuts: shown on a stand-in only.
    latent = verdicts[line_of(DL701_SCRIPT_GLOBALS, "latent = Variable")]
    assert (latent.status, latent.basis) == ("plausible", "stand-in"), latent


def test_dl701_copy_of_a_batch_is_decided_with_the_data_sources_kept_without_graph(verifier, tmp_path):
    source = DL701_SCRIPT_GLOBALS.replace('    encoder = torch.load("encoder.pth")\n', "").replace(
        "        latent = Variable(encoder(real_a))\n        return latent",
        "        tiled = imgs[\"B\"].repeat(2, 1, 1)\n        return Variable(tiled.type(Tensor)), real_a",
    )
    verdicts = _verdicts(verifier, tmp_path, "DL701", source)
    tiled = verdicts[line_of(source, "return Variable(tiled")]
    # A copy the code made of a batch: its requires_grad is the batch's, and the
    # program's batches carry none (the finding says so; the run shows it).
    assert (tiled.status, tiled.basis) == ("confirmed", "user-code"), tiled
    assert "`tiled.type(Tensor)`: requires_grad=False, grad_fn=None" in tiled.evidence
    assert "nothing changed (with synthesized batches for the data source `val_dataloader`)" in tiled.evidence


def test_dl701_label_tensor_of_a_script_is_decided_with_no_input_made_up(verifier, tmp_path):
    source = """
        import torch
        from torch import nn
        from torch.autograd import Variable
        from torch.utils.data import DataLoader

        discriminator = nn.Sequential(nn.Linear(16, 1), nn.Sigmoid())
        dataloader = DataLoader(torch.load("images.pt"), batch_size=8, shuffle=True)
        Tensor = torch.FloatTensor

        for imgs in dataloader:
            valid = Variable(Tensor(imgs.size(0), 1).fill_(1.0), requires_grad=False)
            loss = nn.functional.binary_cross_entropy(discriminator(imgs), valid)
        """
    verification = _verdicts(verifier, tmp_path, "DL701", source)[line_of(source, "valid = Variable")]
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification
    # Only the data source's batches came from outside the code, and those carry no graph.
    assert "the run made up no input that could have given it one" in verification.evidence
