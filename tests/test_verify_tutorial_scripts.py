"""Old tutorial scripts the verifier runs on their own code: a dataset whose
samples the script reads whole (`test_set.samples[:500]`, the attributes
older dataset classes had), a `Variable(x)` followed by a method call on the
same column (`Variable(x).float()`), a `volatile=True` tensor the script
hands to its model only in a later loop, a model whose constructor takes an
input shape, and a batch reshaped to `(-1, steps, features)` before an LSTM
(`verify/extract.py`, `verify/runtime/synthesis.py`, `rules/probes/dl701.py`).

One worker serves the file (torch loads once).
"""

from __future__ import annotations

import inspect
import textwrap

import pytest
from conftest import line_of as _line
from conftest import verifications_by_line as _verdicts

torch = pytest.importorskip("torch")  # the verifier's extra; CI installs it with [dev]

from detachlint.verify.runtime.synthesis import Plan, Synth, method_ast  # noqa: E402
from detachlint.verify.runtime.user_code import UserModule  # noqa: E402


# A held-out split read from files through a package's `datasets` module
# (imported under another name), its samples and labels read whole.
HELD_OUT_SAMPLES = """
    import torch
    from torch import nn
    from torch.autograd import Variable
    from glyphkit import datasets as gsets


    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 3)

        def forward(self, x):
            return self.fc(x.flatten(1))


    held_out = gsets.Glyphs(root="./glyphs", train=False)
    held_x = Variable(torch.unsqueeze(held_out.samples, dim=1)).float()[:500] / 255.0
    held_y = held_out.labels[:500]
    net = Tiny()
    for step in range(4):
        pred = net(held_x).argmax(1)
        hits = (pred == held_y).sum().item()
"""


def test_dl701_on_the_samples_a_dataset_holds_whole_is_confirmed(verifier, tmp_path):
    verdicts = _verdicts(verifier, tmp_path, "held_out.py", HELD_OUT_SAMPLES, "DL701")
    (verification,) = verdicts[_line(HELD_OUT_SAMPLES, "held_x = Variable(")]
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    assert "samples the script's data source `held_out` holds (`held_out.samples`)" in verification.evidence
    assert "with synthesized samples for `held_out.samples`" in verification.evidence
    # The wrapper the finding names, not the `.float()` call on the same column.
    assert "`Variable(torch.unsqueeze(held_out.samples, dim=1))` returned" in verification.evidence


# A batch wrapped and moved in one expression: the outer call starts on the
# finding's column too.
WRAPPED_AND_MOVED = """
    import torch
    from torch import nn
    from torch.autograd import Variable

    from shard_files import read_shards


    train_loader = read_shards(32)
    net = nn.Linear(5, 2)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    for features, targets in train_loader:
        inputs = Variable(features).float()
        loss = nn.functional.cross_entropy(net(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
"""


def test_dl701_watches_the_wrapper_not_the_method_called_on_its_result(verifier, tmp_path):
    verdicts = _verdicts(verifier, tmp_path, "wrapped_moved.py", WRAPPED_AND_MOVED, "DL701")
    (verification,) = verdicts[_line(WRAPPED_AND_MOVED, "inputs = Variable(")]
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    assert "`Variable(features)` returned" in verification.evidence
    assert "a batch of the script's data source `train_loader`" in verification.evidence


# Test inputs made with `volatile=True`; the model that records the graph is
# built afterwards and called on them only inside the training loop.
VOLATILE_THEN_LOOP = """
    import torch
    from torch.autograd import Variable

    points = torch.linspace(-1, 1, 12).unsqueeze(1)
    probe_points = Variable(points, volatile=True)
    regressor = torch.nn.Sequential(torch.nn.Linear(1, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.Adam(regressor.parameters(), lr=0.01)
    for step in range(200):
        loss = (regressor(points) - points.pow(2)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 50 == 0:
            curve = regressor(probe_points)
"""


def test_dl701_volatile_is_decided_on_the_later_loop_that_runs_the_model(verifier, tmp_path):
    verdicts = _verdicts(verifier, tmp_path, "volatile_loop.py", VOLATILE_THEN_LOOP, "DL701")
    (verification,) = verdicts[_line(VOLATILE_THEN_LOOP, "volatile=True")]
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    assert "returned requires_grad=True" in verification.evidence


# A Q-network sized from the environment's observation shape: the feature
# count comes from a dummy pass through its convolutions.
SHAPED_Q_NET = """
    import torch
    from torch import nn
    import torch.autograd as autograd


    class PixelQ(nn.Module):
        def __init__(self, input_shape, n_actions):
            super().__init__()
            self.input_shape = input_shape
            self.conv = nn.Sequential(
                nn.Conv2d(input_shape[0], 8, kernel_size=8, stride=4), nn.ReLU(),
                nn.Conv2d(8, 16, kernel_size=4, stride=2), nn.ReLU(),
            )
            self.head = nn.Linear(self.flat_size(), n_actions)

        def flat_size(self):
            return self.conv(autograd.Variable(torch.zeros(1, *self.input_shape))).view(1, -1).size(1)

        def forward(self, x):
            return self.head(self.conv(x).flatten(1))
"""


def test_dl701_in_a_model_built_from_an_input_shape_is_confirmed(verifier, tmp_path):
    verdicts = _verdicts(verifier, tmp_path, "pixel_q.py", SHAPED_Q_NET, "DL701")
    (verification,) = verdicts[_line(SHAPED_Q_NET, "autograd.Variable(torch.zeros")]
    assert verification.status == "confirmed" and verification.basis == "user-code", verification
    assert "nothing changed" in verification.evidence


def _user(source):
    return UserModule({"path": "train.py", "blocks": [{"line": 1, "text": textwrap.dedent(source)}]})


def test_an_input_shape_parameter_is_a_tuple_of_channels_and_sides():
    user = _user(SHAPED_Q_NET)
    try:
        synth = Synth(user, Plan(spatial=64), {})
        model = synth.construct(user.ns["PixelQ"])
        assert model.input_shape == (3, 64, 64)
    finally:
        user.close()


def test_a_batch_reshaped_to_steps_and_features_takes_that_shape():
    user = _user(
        """
        import torch
        from torch import nn

        class Reader(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(input_size=5, hidden_size=4, batch_first=True)

            def forward(self, x):
                out, _ = self.rnn(x)
                return out[:, -1]

            def step(self, images):
                return self.forward(images.view(-1, 7, 5))
        """
    )
    try:
        synth = Synth(user, Plan(), {})
        reader = user.ns["Reader"]()
        function = method_ast(user.class_ast_of, reader, "step")
        args, kwargs = synth.arguments(inspect.signature(reader.step), function, {"self": reader}, skip_self=False)
        images = kwargs.get("images", args[0] if args else None)
        assert tuple(images.shape) == (2, 7, 5)
        reader.step(images)
    finally:
        user.close()


# A script that only defines its own `Variable` wrapper as a lambda.
LAMBDA_WRAPPER = """
    import torch
    import torch.autograd as autograd

    ON_GPU = torch.cuda.is_available()
    Variable = lambda *args, **kwargs: autograd.Variable(*args, **kwargs).cuda() if ON_GPU else autograd.Variable(*args, **kwargs)
"""


def test_dl701_in_a_lambda_nothing_calls_says_the_callers_decide(verifier, tmp_path):
    verdicts = _verdicts(verifier, tmp_path, "lambda_wrapper.py", LAMBDA_WRAPPER, "DL701")
    for verification in verdicts[_line(LAMBDA_WRAPPER, "Variable = lambda")]:
        assert verification.status == "inconclusive", verification
        assert "the lambda the line binds to `Variable`" in verification.evidence
