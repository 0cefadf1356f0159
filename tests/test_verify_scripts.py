"""Findings in script code (top-level training loops, the `__main__` block)
are verified by running the script itself: the statements the finding's
statement depends on, with its loops cut to a few iterations, its data
sources replaced by synthesized batches (its input, as a function's
arguments are) and its file, network and terminal calls left out.

The first tests check the slice `extract.py` cuts (what it keeps, the caps,
what it leaves out); the others run realistic scripts in the verifier's
worker and check their verdicts rest on the user's own code.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from detachlint.finding import Finding
from detachlint.verify.extract import SCRIPT_FUNCTION, build_spec

from test_verify import RULES, _lint, _write, verifier  # noqa: F401 - `verifier`: the worker fixture of test_verify

# A top-level MNIST-style script: argparse, datasets read from disk, a
# DataLoader with worker processes, a training loop that sums the loss
# tensor (DL401), checkpoints, then an evaluation loop with autograd on (DL301).
TRAIN_SCRIPT = '''
    import argparse
    import os

    import numpy as np
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset


    class NpzImages(Dataset):
        def __init__(self, path):
            archive = np.load(path)
            self.images = torch.from_numpy(archive["images"]).float()
            self.labels = torch.from_numpy(archive["labels"]).long()

        def __len__(self):
            return len(self.labels)

        def __getitem__(self, index):
            return self.images[index], self.labels[index]


    class Net(nn.Module):
        def __init__(self, hidden=32):
            super().__init__()
            self.fc1 = nn.Linear(784, hidden)
            self.fc2 = nn.Linear(hidden, 10)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x.flatten(1))))


    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()

    os.makedirs("checkpoints", exist_ok=True)
    print("training on", os.cpu_count(), "cores")
    train_set = NpzImages("data/train.npz")
    test_set = NpzImages("data/test.npz")
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4)
    test_loader = DataLoader(test_set, batch_size=256)

    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    criterion = nn.CrossEntropyLoss()

    for epoch in range(args.epochs):
        model.train()
        total_loss = 0
        for images, labels in train_loader:
            optimizer.zero_grad()
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
            total_loss += loss
        print(f"epoch {epoch}: {total_loss / len(train_loader)}")
        torch.save(model.state_dict(), f"checkpoints/epoch{epoch}.pt")

    model.eval()
    correct = 0
    for images, labels in test_loader:
        logits = model(images)
        correct += (logits.argmax(1) == labels).sum().item()
    print(correct / len(test_set))
    '''

# The same kind of program under `if __name__ == "__main__":`: adversarial
# training that makes its perturbation a leaf with the deprecated `Variable` (DL702),
# sums the loss tensor (DL401), logs to TensorBoard and keeps the best checkpoint.
MAIN_GUARD_SCRIPT = '''
    """Train a small regressor on arrays saved to disk."""
    import argparse

    import numpy as np
    import torch
    import torch.nn as nn
    from torch.autograd import Variable
    from torch.utils.data import DataLoader, TensorDataset
    from torch.utils.tensorboard import SummaryWriter


    class Regressor(nn.Module):
        def __init__(self, features=12, hidden=64):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, 1))

        def forward(self, x):
            return self.body(x)


    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("--data", default="data/train.npy")
        parser.add_argument("--epochs", type=int, default=50)
        parser.add_argument("--hidden", type=int, default=64)
        args = parser.parse_args()

        writer = SummaryWriter("runs/regressor")
        table = np.load(args.data)
        dataset = TensorDataset(torch.from_numpy(table[:, :-1]).float(), torch.from_numpy(table[:, -1:]).float())
        loader = DataLoader(dataset, batch_size=32, shuffle=True)
        model = Regressor(12, args.hidden)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        criterion = nn.MSELoss()
        best = float("inf")
        for epoch in range(args.epochs):
            epoch_loss = 0.0
            for step, (x, y) in enumerate(loader):
                # Adversarial training: a step along the input gradient first.
                perturbation = Variable(torch.zeros(x.size()), requires_grad=True)
                criterion(model(x + perturbation), y).backward()
                x_adv = (x + 0.01 * perturbation.grad.sign()).detach()
                loss = criterion(model(x), y) + criterion(model(x_adv), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                epoch_loss += loss
                writer.add_scalar("loss", loss.item(), epoch * len(loader) + step)
            if epoch_loss < best:
                best = epoch_loss
                torch.save(model.state_dict(), "best.pt")
        writer.close()
    '''

# No `zero_grad()` in a top-level loop over FashionMNIST (DL601).
NO_ZERO_GRAD_SCRIPT = '''
    import torch
    from torch import nn
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = nn.CrossEntropyLoss()
    train_set = datasets.FashionMNIST("data", download=True, transform=transforms.ToTensor())
    loader = DataLoader(train_set, batch_size=64, shuffle=True)

    for epoch in range(5):
        for images, labels in loader:
            loss = criterion(model(images), labels)
            loss.backward()
            optimizer.step()
        print(epoch, loss.item())
    '''

# An endless loop that only a count stops, asking the terminal and another
# program now and then, and summing its loss tensors (DL401).
WHILE_SCRIPT = '''
    import subprocess
    import sys

    import torch
    from torch import nn

    net = nn.Linear(4, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    steps = 0
    losses = []
    while True:
        x = torch.randn(8, 4)
        loss = net(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss)
        steps += 1
        if steps % 100 == 0:
            subprocess.run(["nvidia-smi"])
            print(input("continue? "))
        if steps > 10000:
            break
    sys.exit(0)
    '''

# Correct: evaluation under `torch.no_grad()` in a top-level loop. Handed a
# DL301 finding anyway, the verifier must refute it on the script itself.
CORRECT_EVAL_SCRIPT = '''
    import torch
    from torch import nn
    from torch.utils.data import DataLoader

    model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 3))
    model.load_state_dict(torch.load("classifier.pt"))
    model.eval()
    loader = DataLoader(torch.load("features.pt"), batch_size=128)
    predictions = []
    with torch.no_grad():
        for features, labels in loader:
            scores = model(features)
            predictions.append(scores.argmax(1))
    torch.save(torch.cat(predictions), "predictions.pt")
    '''


def _spec(tmp_path: Path, name: str, source: str, code: str, line=None):
    path = _write(tmp_path, name, source)
    findings = [f for f in _lint(path, str(path), [code]) if line is None or f.line == line]
    assert findings, f"{code} does not flag {name}"
    return build_spec(findings[0], path.read_text(encoding="utf-8")), findings[0]


def _script_blocks(spec):
    return {block["line"]: block["text"] for block in spec["blocks"] if block.get("script")}


def _line_of(source: str, text: str) -> int:
    lines = textwrap.dedent(source).lstrip("\n").splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


# -- the slice ---------------------------------------------------------------


def test_the_slice_keeps_the_loop_and_what_builds_the_model_optimizer_and_data(tmp_path):
    spec, finding = _spec(tmp_path, "train.py", TRAIN_SCRIPT, "DL401")
    assert spec["target"] == {"kind": "function", "function": SCRIPT_FUNCTION, "script": True}
    blocks = _script_blocks(spec)
    kept = {text.strip().splitlines()[0] for text in blocks.values()}
    assert "model = Net()" in kept
    assert "optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)" in kept
    assert "criterion = nn.CrossEntropyLoss()" in kept
    assert "args = parser.parse_args([])" in kept  # the file's own defaults, no command line
    assert 'parser.add_argument("--epochs", type=int, default=20)' in kept
    # Nothing the loop does not need: not the evaluation after it, not the makedirs or print before it.
    assert not any("makedirs" in text or "cpu_count" in text or "test_loader" in text for text in blocks.values())
    # The data the script reads from disk (through worker processes) is synthesized: an input.
    assert blocks[_line_of(TRAIN_SCRIPT, "train_loader = DataLoader")].strip() == f"train_loader = __dl_data__('train_loader', {_line_of(TRAIN_SCRIPT, 'train_loader = DataLoader')})"
    assert not any(text.startswith("train_set =") for text in blocks.values())
    assert spec["script"] == {"argv": True}
    assert spec["unavailable"] == {}


def test_the_slice_caps_loops_and_skips_file_calls_keeping_line_numbers(tmp_path):
    spec, _ = _spec(tmp_path, "train.py", TRAIN_SCRIPT, "DL401")
    loop_line = _line_of(TRAIN_SCRIPT, "for epoch in range")
    loop = _script_blocks(spec)[loop_line]
    inner_line = _line_of(TRAIN_SCRIPT, "for images, labels in train_loader")
    save_line = _line_of(TRAIN_SCRIPT, "torch.save(model.state_dict()")
    # Epochs: two (the loop holds another); batches: three. Both hold the
    # finding: they go on (to 64 iterations) while its line has not run yet.
    assert f"for epoch in __dl_loop__((range(args.epochs)), 2, {loop_line}, 64):" in loop
    assert f"for images, labels in __dl_loop__((train_loader), 3, {inner_line}, 64):" in loop
    assert f"__dl_skip__({save_line})" in loop and "torch.save" not in loop
    # Rewritten in place: the same lines, so tracebacks and the finding's line still match.
    original = textwrap.dedent(TRAIN_SCRIPT).lstrip("\n").splitlines()
    for line, text in _script_blocks(spec).items():
        statement = next(s for s in ast.parse("\n".join(original)).body if s.lineno == line)
        assert len(text.splitlines()) == statement.end_lineno - statement.lineno + 1
    function = ast.parse("\n".join(text for text in _script_blocks(spec).values()))
    assert function.body  # the rewritten text parses


def test_the_slice_of_a_later_loop_runs_the_training_loop_before_it(tmp_path):
    line = _line_of(TRAIN_SCRIPT, "logits = model(images)")
    spec, _ = _spec(tmp_path, "train.py", TRAIN_SCRIPT, "DL301", line)
    blocks = _script_blocks(spec)
    # `model.eval()` and the training loop change `model`: both run, in order.
    assert blocks[_line_of(TRAIN_SCRIPT, "model.eval()")].strip() == "model.eval()"
    assert _line_of(TRAIN_SCRIPT, "for epoch in range") in blocks
    assert blocks[_line_of(TRAIN_SCRIPT, "correct = 0")].strip() == "correct = 0"
    assert f"__dl_loop__((test_loader), 3, {_line_of(TRAIN_SCRIPT, 'for images, labels in test_loader')}, 64)" in blocks[
        _line_of(TRAIN_SCRIPT, "for images, labels in test_loader")
    ]
    # The print after the loop needs `test_set`, which the slice does not build: left out.
    assert not any("len(test_set)" in text for text in blocks.values())


def test_the_main_guard_is_script_code_too(tmp_path):
    line = _line_of(MAIN_GUARD_SCRIPT, "perturbation = Variable(torch.zeros(x.size()), requires_grad=True)")
    spec, finding = _spec(tmp_path, "main.py", MAIN_GUARD_SCRIPT, "DL701", line)
    blocks = _script_blocks(spec)
    # Dedented out of the `if`, and the finding's column with it.
    assert all(not text[:1].isspace() for text in blocks.values())
    assert spec["column"] == finding.column - 4
    assert blocks[_line_of(MAIN_GUARD_SCRIPT, "writer = SummaryWriter")].strip().startswith("writer = __dl_sink__('writer'")
    # `np.load` reads a file: the loader built from it is synthesized, not the array read.
    assert "__dl_data__('loader'" in blocks[_line_of(MAIN_GUARD_SCRIPT, "loader = DataLoader")]
    assert not any("np.load" in text for text in blocks.values())


def test_in_memory_data_runs_as_written_and_a_tensor_read_from_disk_stops_the_slice(tmp_path):
    in_memory = '''
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        inputs = torch.randn(12, 4)
        targets = torch.randn(12, 1)
        loader = DataLoader(TensorDataset(inputs, targets), batch_size=4, num_workers=0)
        weights = torch.zeros(4, 1, requires_grad=True)
        history = []
        for x, y in loader:
            loss = ((x @ weights - y) ** 2).mean()
            loss.backward()
            history.append(loss)
        '''
    spec, _ = _spec(tmp_path, "memory.py", in_memory, "DL401")
    blocks = _script_blocks(spec)
    assert blocks[_line_of(in_memory, "loader = DataLoader")].strip().startswith("loader = DataLoader(TensorDataset(")
    from_disk = '''
        import torch

        weights = torch.load("weights.pt")
        squashed = weights.sigmoid()
        for step in range(3):
            raw = squashed.data
            raw.mul_(0.5)
            squashed.sum().backward()
        '''
    spec, _ = _spec(tmp_path, "disk.py", from_disk, "DL101")
    assert "gets from `torch.load` (line 3)" in spec["reason"] and "top-level script code" in spec["reason"]


def test_the_slice_caps_a_while_loop_and_skips_the_terminal_and_other_programs(tmp_path):
    spec, _ = _spec(tmp_path, "loop.py", WHILE_SCRIPT, "DL401")
    loop = _script_blocks(spec)[_line_of(WHILE_SCRIPT, "while True")]
    assert f"for __dl_step__ in __dl_while__(lambda: (True), 3, {_line_of(WHILE_SCRIPT, 'while True')}, 64):" in loop
    assert f"__dl_skip__({_line_of(WHILE_SCRIPT, 'subprocess.run')})" in loop
    assert f"__dl_skip__({_line_of(WHILE_SCRIPT, 'print(input(')})" in loop
    assert "input(" not in loop and "subprocess" not in loop
    # `sys.exit` after the loop is not something the loop needs.
    assert not any("sys.exit" in text for text in _script_blocks(spec).values())


def test_an_import_in_the_main_guard_that_fails_leaves_its_names_missing(tmp_path):
    from detachlint.verify.runtime.user_code import parse_blocks

    source = '''
        import torch

        if __name__ == "__main__":
            from dynamic_loss_scaler import DynamicLossScaler

            scaler = DynamicLossScaler()
            for step in range(3):
                w = torch.randn(3, requires_grad=True).double()
                (w.sum() * scaler.loss_scale).backward()
                print(w.grad)
        '''
    spec, _ = _spec(tmp_path, "guarded.py", source, "DL501")
    parsed = parse_blocks(spec)
    # The import is a block of its own (run at module level, missing when it fails), not script code.
    assert any(isinstance(statements[0], ast.ImportFrom) and statements[0].module == "dynamic_loss_scaler" for _, statements in parsed)
    (script,) = [statements[0] for _, statements in parsed if isinstance(statements[0], ast.FunctionDef) and statements[0].name == SCRIPT_FUNCTION]
    assert not any(isinstance(node, ast.ImportFrom) for node in ast.walk(script))


# -- verdicts ----------------------------------------------------------------


@pytest.fixture(scope="module")
def script_verdicts(verifier, tmp_path_factory):  # noqa: F811 - the imported fixture
    """{(file, code, line): Verification} for the scripts above, in one run of the worker."""
    folder = tmp_path_factory.mktemp("scripts")
    findings = []
    scripts = (
        ("train.py", TRAIN_SCRIPT, ["DL301", "DL401"]),
        ("main.py", MAIN_GUARD_SCRIPT, ["DL401", "DL701"]),
        ("no_zero_grad.py", NO_ZERO_GRAD_SCRIPT, ["DL601"]),
        ("loop.py", WHILE_SCRIPT, ["DL401"]),
    )
    for name, source, codes in scripts:
        path = _write(folder, name, source)
        findings += _lint(path, str(path), codes)
    correct = _write(folder, "correct.py", CORRECT_EVAL_SCRIPT)
    assert not _lint(correct, str(correct), ["DL301", "DL401"])  # correct code: the rules leave it alone
    line = _line_of(CORRECT_EVAL_SCRIPT, "scores = model(features)")
    rule = RULES["DL301"]
    findings.append(
        Finding(str(correct), line, 18, "DL301", rule.name, line, 33, "`model` runs with autograd on in this evaluation loop", rule.severity)
    )
    verified = verifier.verify(findings, lambda display: Path(display).read_text(encoding="utf-8"))
    return {(Path(f.path).name, f.code, f.line): f.verification for f in verified}


def _verdict(verdicts, name, code, source, text):
    verification = verdicts[(name, code, _line_of(source, text))]
    assert verification is not None
    return verification


def test_a_top_level_training_loop_confirms_dl401_on_the_users_code(script_verdicts):
    verification = _verdict(script_verdicts, "train.py", "DL401", TRAIN_SCRIPT, "total_loss += loss")
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    assert "autograd nodes reachable from `total_loss`" in verification.evidence
    # The evidence says what the script was given: synthesized batches, the parser's defaults.
    assert "with 3 synthesized batches for `train_loader`" in verification.evidence
    assert "argument defaults of the file's parser" in verification.evidence


def test_an_evaluation_loop_after_training_confirms_dl301_on_the_users_code(script_verdicts):
    verification = _verdict(script_verdicts, "train.py", "DL301", TRAIN_SCRIPT, "logits = model(images)")
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    assert "requires_grad=True" in verification.evidence
    # The training loop before it ran two epochs, its checkpoint save skipped.
    assert f"the loop on line {_line_of(TRAIN_SCRIPT, 'for epoch in range')} stopped after 2 iterations" in verification.evidence
    assert f"skipped (line {_line_of(TRAIN_SCRIPT, 'torch.save(model.state_dict()')})" in verification.evidence


def test_a_main_guard_script_confirms_dl701_and_dl401_on_the_users_code(script_verdicts):
    for code, text in (("DL702", "perturbation = Variable(torch.zeros(x.size()), requires_grad=True)"), ("DL401", "epoch_loss += loss")):
        verification = _verdict(script_verdicts, "main.py", code, MAIN_GUARD_SCRIPT, text)
        assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
        assert "logging to `writer` discarded" in verification.evidence
        assert "synthesized batches for `loader`" in verification.evidence


def test_a_correct_script_is_refuted_on_the_users_code(script_verdicts):
    verification = _verdict(script_verdicts, "correct.py", "DL301", CORRECT_EVAL_SCRIPT, "scores = model(features)")
    assert (verification.status, verification.basis) == ("refuted", "user-code"), verification.evidence
    assert "requires_grad=False" in verification.evidence
    assert "synthesized batches for `loader`" in verification.evidence


def test_a_missing_zero_grad_in_a_top_level_loop_confirms_dl601_on_the_users_code(script_verdicts):
    verification = _verdict(script_verdicts, "no_zero_grad.py", "DL601", NO_ZERO_GRAD_SCRIPT, "optimizer.step()")
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    assert "synthesized batches for `loader`" in verification.evidence


def test_an_endless_loop_runs_a_few_iterations_and_confirms_dl401(script_verdicts):
    verification = _verdict(script_verdicts, "loop.py", "DL401", WHILE_SCRIPT, "losses.append(loss)")
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence


def test_annotated_script_variables_compile_as_globals(tmp_path):
    from detachlint.verify.runtime.user_code import parse_blocks

    source = '''
        import torch

        w = torch.randn(3, requires_grad=True)
        results: list = []
        for i in range(5):
            pred: torch.Tensor = (w * i).sum()
            pred.backward()
            results.append(pred)
        '''
    spec, _ = _spec(tmp_path, "annotated.py", source, "DL401")
    for _, statements in parse_blocks(spec):
        # A name declared `global` cannot be annotated: the script's annotations are dropped.
        compile(ast.Module(body=statements, type_ignores=[]), "annotated.py", "exec")
