"""Calls between the files of one run (`analysis/project.py`): a function is
judged by the grad mode its callers in other files give it, found the way
Python imports, kept in the cache with what it depends on, parsed once
unless its callers change its analysis."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from conftest import run_cli
from detachlint import api, engine
from detachlint.analysis.project import ProjectFiles, file_key

EVAL_HELPER = '''
import torch


def evaluate(model, loader, criterion):
    model.eval()
    total = 0.0
    for x, y in loader:
        out = model(x)
        total += criterion(out, y).item()
    return total / len(loader)
'''

TRAIN_CALLS_UNDER_NO_GRAD = '''
import torch
from torch import nn
from utils import evaluate


def main(train_loader, val_loader):
    model = nn.Linear(4, 2)
    criterion = nn.CrossEntropyLoss()
    with torch.no_grad():
        val = evaluate(model, val_loader, criterion)
    return val
'''

FIT_HELPER = '''
import torch


def fit(model, loader, optimizer, criterion):
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    return loss
'''

MAIN_FITS_UNDER_NO_GRAD = '''
import torch
from torch import nn
import engine


def main(loader):
    net = nn.Linear(4, 3)
    optimizer = torch.optim.Adam(net.parameters())
    criterion = nn.CrossEntropyLoss()
    with torch.no_grad():
        engine.fit(net, loader, optimizer, criterion)
'''


def write(folder: Path, files: dict) -> Path:
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return folder


def checked(folder: Path, cross_module: bool = True, **options) -> list:
    """The findings of a run over `folder`, from inside it."""
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        run = api.check(["."], api.CheckOptions(no_cache=True, jobs=1, cross_module=cross_module, **options))
    finally:
        os.chdir(cwd)
    assert not run.errors, run.errors
    return run.findings


def findings(folder: Path, cross_module: bool = True, **options) -> list:
    """(file name, line, code) of a run over `folder`, from inside it."""
    return [(Path(f.path).as_posix(), f.line, f.code) for f in checked(folder, cross_module, **options)]


def _verify_the_finding(verifier, folder: Path) -> tuple:
    """The one finding of a run over `folder`, and it verified, from inside it."""
    (finding,) = checked(folder)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        (verified,) = verifier.verify([finding], lambda display: Path(display).read_text(encoding="utf-8"))
    finally:
        os.chdir(cwd)
    return finding, verified


# Finding the file a module name means --------------------------------------


def test_module_names_resolve_as_python_imports_them(tmp_path):
    write(
        tmp_path,
        {
            "train.py": "",
            "utils.py": "",
            "pkg/__init__.py": "",
            "pkg/engine.py": "",
            "pkg/sub/__init__.py": "",
            "pkg/sub/steps.py": "",
            "tools/run.py": "",
        },
    )
    files = ProjectFiles(tmp_path.rglob("*.py"))
    key = lambda name: file_key(tmp_path / name)  # noqa: E731
    train, steps = key("train.py"), key("pkg/sub/steps.py")
    # A script's own folder, and the folder above a package.
    assert files.function(train, None, "utils.evaluate") == (key("utils.py"), "evaluate")
    assert files.function(train, None, "pkg.engine.fit") == (key("pkg/engine.py"), "fit")
    assert files.function(steps, None, "pkg.engine.fit") == (key("pkg/engine.py"), "fit")
    # A package's own `__init__.py`.
    assert files.function(train, None, "pkg.sub.run") == (key("pkg/sub/__init__.py"), "run")
    # Relative imports start from the caller's package.
    assert files.function(steps, str(tmp_path / "pkg"), "engine.fit") == (key("pkg/engine.py"), "fit")
    # Not a file of the run, a module of another folder, or the caller itself.
    assert files.function(train, None, "torch.no_grad") is None
    assert files.function(train, None, "run.main") is None
    assert files.function(key("utils.py"), None, "utils.evaluate") is None


# What callers in other files change -----------------------------------------


def test_an_eval_helper_called_under_no_grad_elsewhere_is_not_flagged(tmp_path):
    write(tmp_path, {"utils.py": EVAL_HELPER, "train.py": TRAIN_CALLS_UNDER_NO_GRAD})
    assert findings(tmp_path) == []
    # File by file, the helper looks like a loop with autograd on.
    assert findings(tmp_path, cross_module=False) == [("utils.py", 8, "DL301")]


def test_a_caller_elsewhere_with_autograd_on_keeps_the_finding(tmp_path):
    evaluate_twice = TRAIN_CALLS_UNDER_NO_GRAD + '''

def report(model, loader, criterion):
    model.eval()
    return evaluate(model, loader, criterion)
'''
    write(tmp_path, {"utils.py": EVAL_HELPER, "train.py": evaluate_twice})
    assert findings(tmp_path) == [("utils.py", 8, "DL301")]


def test_a_function_off_only_in_its_own_file_is_on_when_another_file_calls_it_with_grad(tmp_path):
    helper = EVAL_HELPER + '''

def report(model, loader, criterion):
    with torch.no_grad():
        return evaluate(model, loader, criterion)
'''
    caller = '''
    from torch import nn
    from utils import evaluate


    def validate(model, loader):
        return evaluate(model, loader, nn.CrossEntropyLoss())
    '''
    write(tmp_path, {"utils.py": helper})
    assert findings(tmp_path) == []
    write(tmp_path, {"train.py": caller})
    assert findings(tmp_path) == [("utils.py", 8, "DL301")]


def test_backward_in_a_step_another_file_calls_under_no_grad_is_found(tmp_path):
    write(tmp_path, {"engine.py": FIT_HELPER, "main.py": MAIN_FITS_UNDER_NO_GRAD})
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        run = api.check(["."], api.CheckOptions(no_cache=True, jobs=1))
    finally:
        os.chdir(cwd)
    (finding,) = run.findings
    assert (finding.path, finding.line, finding.code) == ("engine.py", 8, "DL302")
    assert finding.message.endswith("when `fit` is called in main.py (line 11), where autograd is off")
    assert finding.details == {"called_with_grad_off": "in main.py (line 11)"}
    assert findings(tmp_path, cross_module=False) == []


def test_grad_mode_follows_a_chain_of_files(tmp_path):
    """main.py turns autograd off around `run_eval`, which calls `evaluate`
    in a third file: each hop is one more round."""
    runner = '''
    from utils import evaluate


    def run_eval(model, loader, criterion):
        return evaluate(model, loader, criterion)
    '''
    main = '''
    import torch
    from evaluation import run_eval


    def main(model, loader, criterion):
        with torch.inference_mode():
            return run_eval(model, loader, criterion)
    '''
    write(tmp_path, {"utils.py": EVAL_HELPER, "evaluation.py": runner, "main.py": main})
    assert findings(tmp_path) == []
    assert findings(tmp_path, cross_module=False) == [("utils.py", 8, "DL301")]


def test_relative_imports_inside_a_package(tmp_path):
    cli = '''
    import torch
    from .engine import evaluate
    from . import engine


    def main(model, loader, criterion):
        with torch.no_grad():
            evaluate(model, loader, criterion)
            engine.evaluate(model, loader, criterion)
    '''
    write(tmp_path, {"pkg/__init__.py": "", "pkg/engine.py": EVAL_HELPER, "pkg/cli.py": cli})
    assert findings(tmp_path) == []
    assert findings(tmp_path, cross_module=False) == [("pkg/engine.py", 8, "DL301")]


RUNNER = '''
import torch


class Runner:
    def __init__(self, criterion):
        self.criterion = criterion

    def evaluate(self, model, loader):
        model.eval()
        total = 0.0
        for x, y in loader:
            out = model(x)
            total += self.criterion(out, y).item()
        return total / len(loader)
'''


def test_a_method_of_an_object_built_from_another_files_class(tmp_path):
    main = '''
    import torch
    from torch import nn
    from runner import Runner


    def main(model, loader):
        runner = Runner(nn.CrossEntropyLoss())
        with torch.no_grad():
            return runner.evaluate(model, loader)
    '''
    write(tmp_path, {"runner.py": RUNNER, "main.py": main})
    assert findings(tmp_path) == []
    assert findings(tmp_path, cross_module=False) == [("runner.py", 12, "DL301")]


def test_a_method_of_a_member_built_from_another_files_class(tmp_path):
    app = '''
    import torch
    from torch import nn
    import runner


    class App:
        def __init__(self):
            self.runner = runner.Runner(nn.CrossEntropyLoss())

        def report(self, model, loader):
            with torch.inference_mode():
                return self.runner.evaluate(model, loader)
    '''
    write(tmp_path, {"runner.py": RUNNER, "app.py": app})
    assert findings(tmp_path) == []
    # An object that is sometimes something else is not followed.
    write(tmp_path, {"app.py": app.replace("        self.runner = runner", "        self.runner = None\n        self.runner = runner")})
    assert findings(tmp_path) == [("runner.py", 12, "DL301")]


def test_a_local_function_of_the_same_name_is_not_the_imported_one(tmp_path):
    caller = '''
    import torch
    from utils import evaluate


    def main(model, loader, criterion, evaluate):
        with torch.no_grad():
            return evaluate(model, loader, criterion)
    '''
    write(tmp_path, {"utils.py": EVAL_HELPER, "train.py": caller})
    assert findings(tmp_path) == [("utils.py", 8, "DL301")]


def test_only_files_whose_callers_change_something_are_parsed_twice(tmp_path, monkeypatch):
    unrelated = '''
    import torch


    def step(model, x):
        return model(x).sum()
    '''
    write(tmp_path, {"utils.py": EVAL_HELPER, "train.py": TRAIN_CALLS_UNDER_NO_GRAD, "other.py": unrelated})
    parsed = []
    original = engine.parse

    def counting(source, path):
        parsed.append(Path(path).name)
        return original(source, path)

    monkeypatch.setattr(engine, "parse", counting)
    assert findings(tmp_path) == []
    assert sorted(parsed) == ["other.py", "train.py", "utils.py", "utils.py"]


def test_fixes_are_judged_with_the_callers_elsewhere(tmp_path):
    write(tmp_path, {"utils.py": EVAL_HELPER, "train.py": TRAIN_CALLS_UNDER_NO_GRAD})
    before = (tmp_path / "utils.py").read_text()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        run = api.check(["."], api.CheckOptions(no_cache=True, jobs=1, fix=True, unsafe_fixes=True))
    finally:
        os.chdir(cwd)
    assert (run.fixed, run.findings) == (0, [])
    assert (tmp_path / "utils.py").read_text() == before


# The cache and the command line ---------------------------------------------


def _cli(folder: Path, *extra: str) -> list:
    result = run_cli("check", ".", "--format", "json", "--select", "ALL", *extra, cwd=folder)
    assert result.returncode in (0, 1), result.stderr
    return [(f["path"], f["line"], f["code"]) for f in json.loads(result.stdout)]


def test_a_changed_caller_re_analyses_the_unchanged_callee(tmp_path):
    write(tmp_path, {"utils.py": EVAL_HELPER, "train.py": TRAIN_CALLS_UNDER_NO_GRAD})
    assert _cli(tmp_path) == []
    assert _cli(tmp_path) == []  # warm
    # The caller drops its `with torch.no_grad():`; utils.py is not touched.
    train = tmp_path / "train.py"
    train.write_text(train.read_text().replace("    with torch.no_grad():\n        val =", "    if True:\n        val ="))
    assert _cli(tmp_path) == [("utils.py", 8, "DL301")]
    assert _cli(tmp_path) == [("utils.py", 8, "DL301")]  # warm again
    assert _cli(tmp_path, "--no-cache") == [("utils.py", 8, "DL301")]


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_parallel_and_serial_runs_agree(tmp_path, jobs):
    write(
        tmp_path,
        {
            "utils.py": EVAL_HELPER,
            "train.py": TRAIN_CALLS_UNDER_NO_GRAD,
            "engine.py": FIT_HELPER,
            "main.py": MAIN_FITS_UNDER_NO_GRAD,
            "pkg/__init__.py": "",
            "pkg/more.py": EVAL_HELPER,
        },
    )
    assert _cli(tmp_path, "--no-cache", "--jobs", jobs) == [("engine.py", 8, "DL302"), ("pkg/more.py", 8, "DL301")]


def test_the_verifier_runs_the_step_as_the_other_file_calls_it(verifier, tmp_path):
    """The reproduction runs `fit` under `torch.no_grad()`, as main.py does,
    and says so; run plainly it would raise nothing and decide nothing."""
    write(tmp_path, {"engine.py": FIT_HELPER, "main.py": MAIN_FITS_UNDER_NO_GRAD})
    finding, verified = _verify_the_finding(verifier, tmp_path)
    verification = verified.verification
    assert verification.status == "plausible", verification
    assert "raised RuntimeError: element 0 of tensors does not require grad" in verification.evidence
    assert "run under torch.no_grad(), as its call in main.py (line 11) runs it" in verification.evidence


PROBE_MODEL = '''
import torch
from torch import nn


class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        features = self.backbone(x).detach()
        return self.head(features)
'''

PROBE_TRAINING = '''
import torch
from torch import nn
from models import Probe


def main(loader):
    model = Probe()
    optimizer = torch.optim.SGD(model.head.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
'''


def test_a_model_trained_in_another_file_is_seen_whole(tmp_path):
    """models.py detaches the backbone; train.py's only optimizer steps the
    head: a linear probe, nothing meant to train is starved."""
    write(tmp_path, {"models.py": PROBE_MODEL, "train.py": PROBE_TRAINING})
    assert findings(tmp_path) == []
    assert findings(tmp_path, cross_module=False) == [("models.py", 12, "DL201")]


@pytest.mark.parametrize(
    "change",
    [
        # The optimizer steps the whole model: the backbone is meant to train.
        ("model.head.parameters()", "model.parameters()"),
        # Parameters from a list built elsewhere: they could be anything.
        ("model.head.parameters()", "params"),
    ],
)
def test_optimizers_that_step_more_or_cannot_be_read_keep_the_finding(tmp_path, change):
    write(tmp_path, {"models.py": PROBE_MODEL, "train.py": PROBE_TRAINING.replace(*change)})
    assert findings(tmp_path) == [("models.py", 12, "DL201")]


def test_every_file_that_trains_the_model_counts(tmp_path):
    finetune = PROBE_TRAINING.replace("model.head.parameters()", "model.parameters()")
    write(tmp_path, {"models.py": PROBE_MODEL, "probe.py": PROBE_TRAINING, "finetune.py": finetune})
    assert findings(tmp_path) == [("models.py", 12, "DL201")]


def test_context_files_count_without_being_reported(tmp_path):
    """pre-commit passes the staged utils.py alone: with `--context .` it is
    judged as the run over the whole project judges it."""
    write(tmp_path, {"utils.py": EVAL_HELPER, "train.py": TRAIN_CALLS_UNDER_NO_GRAD, "other.py": EVAL_HELPER})
    alone = run_cli("check", "utils.py", "--format", "json", "--no-cache", cwd=tmp_path)
    assert [(f["path"], f["line"]) for f in json.loads(alone.stdout)] == [("utils.py", 8)]
    for cache in ("--no-cache", "--cache-dir=.cache"):
        with_context = run_cli("check", "utils.py", "--context", ".", "--format", "json", cache, cwd=tmp_path)
        assert (with_context.returncode, json.loads(with_context.stdout)) == (0, []), with_context.stderr
    # other.py has the same loop and no caller: read for context, never reported.
    both = run_cli("check", "utils.py", "--context", ".", "--format", "json", "--no-cache", cwd=tmp_path)
    assert b"other.py" not in both.stdout
    assert run_cli("check", "other.py", "--context", ".", "--no-cache", cwd=tmp_path).returncode == 1


def test_a_script_block_calling_under_no_grad_names_its_line(tmp_path):
    script = '''
    import torch
    from torch import nn
    from engine import fit

    if __name__ == "__main__":
        net = nn.Linear(4, 3)
        with torch.no_grad():
            fit(net, [], torch.optim.SGD(net.parameters(), lr=0.1), nn.CrossEntropyLoss())
    '''
    write(tmp_path, {"engine.py": FIT_HELPER, "run.py": script})
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        (finding,) = api.check(["."], api.CheckOptions(no_cache=True, jobs=1)).findings
    finally:
        os.chdir(cwd)
    assert (finding.path, finding.code) == ("engine.py", "DL302")
    assert finding.message.endswith("when `fit` is called in run.py (line 8), where autograd is off")


# A helper loop of another file, called after `model.eval()` ------------------

RUN_EPOCH = '''
import torch


def run_epoch(model, loader, criterion, *, device="cpu"):
    total = 0.0
    for x, y in loader:
        out = model(x.to(device))
        total += criterion(out, y).item()
    return total / len(loader)


class Runner:
    def sweep(self, loader, net):
        for x in loader:
            net(x)
'''

MAIN_VALIDATES_THROUGH_RUN_EPOCH = '''
import torch
from torch import nn
from utils import Runner, run_epoch


def main(model, train_loader, val_loader, optimizer):
    criterion = nn.CrossEntropyLoss()
    runner = Runner()
    for epoch in range(3):
        model.train()
        for x, y in train_loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
        model.eval()
        val = run_epoch(model, val_loader, criterion)
        runner.sweep(val_loader, net=model)
    return val
'''


def test_a_helper_loop_of_another_file_evaluates_after_eval(tmp_path):
    write(tmp_path, {"utils.py": RUN_EPOCH, "train.py": MAIN_VALIDATES_THROUGH_RUN_EPOCH})
    assert findings(tmp_path) == [("train.py", 16, "DL301"), ("train.py", 17, "DL301")]
    # Alone, neither file shows it: the helper has no `.eval()`, the caller no loop.
    assert findings(tmp_path, cross_module=False) == []
    messages = [f.message for f in checked(tmp_path)]
    assert "(the loop of `run_epoch(...)`, utils.py line 6)" in messages[0]
    assert "(the loop of `runner.sweep(...)`, utils.py line 14)" in messages[1]


@pytest.mark.parametrize(
    "change",
    [
        # Called under no_grad, or in train mode.
        ("        val = run_epoch(", "        with torch.no_grad():\n            val = run_epoch("),
        ("        model.eval()\n", "        model.train()\n"),
        # The helper sets its own grad mode, or trains.
        ("def run_epoch(", "@torch.no_grad()\ndef run_epoch("),
        ("        total += criterion(out, y).item()", "        criterion(out, y).backward()"),
        # Its name says it evaluates: its loop is reported where it is.
        ("run_epoch", "evaluate_epoch"),
    ],
)
def test_helper_loops_of_other_files_that_do_not_evaluate_on_the_call(tmp_path, change):
    old, new = change
    utils, train = RUN_EPOCH, MAIN_VALIDATES_THROUGH_RUN_EPOCH.replace("        runner.sweep(val_loader, net=model)\n", "")
    utils, train = utils.replace(old, new), train.replace(old, new)
    write(tmp_path, {"utils.py": utils, "train.py": train})
    found = findings(tmp_path)
    if old == "run_epoch":
        assert found == [("utils.py", 7, "DL301")]
    else:
        assert found == []




# What a function of another file returns --------------------------------------

STEPS = '''
import torch
import torch.nn.functional as F


def train_step(model, x, y, opt):
    out = model(x)
    loss = F.cross_entropy(out, y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss, (out.argmax(1) == y).float().mean()


def train_step_item(model, x, y, opt):
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    return loss.item()
'''

MAIN_SUMS_WHAT_STEPS_RETURN = '''
import torch
import steps
from steps import train_step_item


def main(model, loader, opt):
    total = accuracy = plain = 0
    for x, y in loader:
        loss, acc = steps.train_step(model, x, y, opt)
        total += loss
        accuracy += acc
        plain += train_step_item(model, x, y, opt)
        total += steps.train_step(model, x, y, opt)[1]
    return total, accuracy, plain
'''


def test_a_loss_returned_by_another_files_step_keeps_its_graph_when_summed(tmp_path):
    write(tmp_path, {"steps.py": STEPS, "train.py": MAIN_SUMS_WHAT_STEPS_RETURN})
    # The loss keeps its graph; the accuracy and `loss.item()` carry none.
    assert findings(tmp_path) == [("train.py", 10, "DL401")]
    assert findings(tmp_path, cross_module=False) == []
    item_only = STEPS.replace("return loss, (out", "return loss.item(), (out")
    write(tmp_path, {"steps.py": item_only})
    assert findings(tmp_path) == []


TEMPLATE_TRAINER = '''
import torch


class BaseTrainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer

    def train_epoch(self, loader):
        total = 0.0
        for x, y in loader:
            total += self.step(x, y)
        return total / len(loader)

    def step(self, x, y):
        raise NotImplementedError
'''

SUBCLASS_RETURNS_ITS_LOSS = '''
import torch.nn.functional as F

from engine import BaseTrainer


class RegressionTrainer(BaseTrainer):
    def step(self, x, y):
        loss = F.mse_loss(self.model(x), y)
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()
        return loss
'''


def test_a_template_methods_override_in_another_file_returns_its_graph(tmp_path):
    """`total += self.step(x, y)` in a base class whose `step` only raises:
    what runs is the subclass's override, in another file, which returns
    its loss with the graph."""
    write(tmp_path, {"engine.py": TEMPLATE_TRAINER, "regression.py": SUBCLASS_RETURNS_ITS_LOSS})
    assert findings(tmp_path) == [("engine.py", 12, "DL401")]
    assert findings(tmp_path, cross_module=False) == []
    # Every override returns a number: the template is no leak.
    write(tmp_path, {"regression.py": SUBCLASS_RETURNS_ITS_LOSS.replace("return loss", "return loss.item()")})
    assert findings(tmp_path) == []
    # A base whose own `step` does the work runs its own, not the subclass's.
    concrete = TEMPLATE_TRAINER.replace("raise NotImplementedError", "return float(self.model(x).sum())")
    write(tmp_path, {"engine.py": concrete, "regression.py": SUBCLASS_RETURNS_ITS_LOSS})
    assert findings(tmp_path) == []


def test_a_changed_override_re_analyses_the_unchanged_base(tmp_path):
    write(tmp_path, {"engine.py": TEMPLATE_TRAINER, "regression.py": SUBCLASS_RETURNS_ITS_LOSS.replace("return loss", "return loss.item()")})
    assert _cli(tmp_path) == []
    regression = tmp_path / "regression.py"
    regression.write_text(regression.read_text().replace("return loss.item()", "return loss"))
    assert _cli(tmp_path) == [("engine.py", 12, "DL401")]
    assert _cli(tmp_path) == [("engine.py", 12, "DL401")]  # warm


MAIN_VALIDATES_A_BUILT_MODEL = '''
import torch
from torch import nn
from utils import run_epoch


def main(val_loader):
    model = nn.Sequential(nn.Linear(8, 3))  # the width of synthesized batches: the layer is in another file
    criterion = nn.CrossEntropyLoss()
    model.eval()
    return run_epoch(model, val_loader, criterion)
'''


def test_the_verifier_says_the_helper_of_another_file_made_the_model_call(verifier, tmp_path):
    """The model call that recorded a graph is the helper's, in utils.py:
    the evidence says the call on the line ran one, not that it returned one."""
    write(tmp_path, {"utils.py": RUN_EPOCH, "train.py": MAIN_VALIDATES_A_BUILT_MODEL})
    finding, verified = _verify_the_finding(verifier, tmp_path)
    assert (finding.path, finding.line, finding.code) == ("train.py", 10, "DL301")
    verification = verified.verification
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification
    assert "`run_epoch(model, val_loader, criterion)` ran a model call whose output had requires_grad=True" in verification.evidence
