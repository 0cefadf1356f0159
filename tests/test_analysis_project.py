"""The facts that cross files, asked of the model directly: a function's
callers elsewhere in GradMode, optimizer ownership of a class's members,
what a file's summary tells the others."""

from __future__ import annotations

import textwrap
from pathlib import Path

import libcst as cst

from detachlint.analysis import Facts
from detachlint.analysis.grad_mode import Mode
from detachlint.analysis.project import Elsewhere, ExternalCall, HelperLoop, ProjectFiles, Summary, file_key, incoming, summarize

HELPERS = """
import torch

def evaluate(model, loader):
    for x in loader:
        model(x)

class Runner:
    def step(self, model, x):
        return model(x)

def report(model, loader):
    with torch.no_grad():
        evaluate(model, loader)
"""


def facts_of(source: str, elsewhere: Elsewhere = None, path: str = "") -> Facts:
    text = textwrap.dedent(source)
    return Facts(cst.parse_module(text), path, text.encode(), elsewhere)


def function(facts: Facts, name: str) -> cst.FunctionDef:
    return next(f for f in facts.index.nodes(cst.FunctionDef) if f.name.value == name)


def off(path: str = "train.py", line: int = 9) -> ExternalCall:
    return ExternalCall(path, line, Mode.DISABLED.value, False)


def on(path: str = "train.py") -> ExternalCall:
    return ExternalCall(path, 0, None, False)


def test_callers_elsewhere_join_the_files_own():
    alone = facts_of(HELPERS)
    # Its one call in the file runs under no_grad.
    assert alone.grad_mode.called_only_when_disabled(function(alone, "evaluate"))
    joined = facts_of(HELPERS, Elsewhere(calls={"evaluate": (on(),)}))
    assert not joined.grad_mode.called_only_when_disabled(function(joined, "evaluate"))
    assert joined.grad_mode.called_here_only_when_disabled(function(joined, "evaluate"))
    # A method of a top-level class, by `Class.method`.
    method = facts_of(HELPERS, Elsewhere(calls={"Runner.step": (off(),)}))
    step = function(method, "step")
    assert method.grad_mode.callers_elsewhere(step) == (off(),)
    assert method.grad_mode.disabled_elsewhere(step) == off()
    assert method.grad_mode.mode_at(step.body) is Mode.DISABLED


def test_a_branched_or_maybe_disabled_call_is_no_certain_caller():
    maybe = ExternalCall("train.py", 4, Mode.MAYBE_DISABLED.value, False)
    branched = ExternalCall("train.py", 5, Mode.DISABLED.value, True)
    facts = facts_of(HELPERS, Elsewhere(calls={"Runner.step": (maybe, branched)}))
    step = function(facts, "step")
    assert facts.grad_mode.called_only_when_disabled(step)  # maybe-disabled counts as off
    assert facts.grad_mode.disabled_elsewhere(step) is None  # but names no certain caller


MODEL = """
import torch
from torch import nn

class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Linear(4, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x):
        return self.head(self.backbone(x).detach())
"""


def test_members_stepped_by_the_optimizers():
    facts = facts_of(MODEL + "\nmodel = Probe()\nopt = torch.optim.SGD(model.head.parameters(), lr=0.1)\n")
    probe = next(iter(facts.index.nodes(cst.ClassDef)))
    assert facts.optimizers.members_stepped(probe) == frozenset({"head"})
    owner = facts.modules.class_of(probe.body)
    assert facts.optimizers.meant_to_train(owner) == {"head"}
    for other in ("model.parameters()", "params", "self_made.head.parameters()"):
        changed = facts_of(MODEL + f"\nmodel = Probe()\nopt = torch.optim.SGD({other}, lr=0.1)\n")
        assert changed.optimizers.members_stepped(next(iter(changed.index.nodes(cst.ClassDef)))) is None, other
    # A scheduler is no optimizer; another file's optimizer counts.
    elsewhere = facts_of(MODEL + "\nsched = torch.optim.lr_scheduler.StepLR(opt, 1)\n", Elsewhere(stepped={"Probe": frozenset({"head"})}))
    assert elsewhere.optimizers.members_stepped(next(iter(elsewhere.index.nodes(cst.ClassDef)))) == frozenset({"head"})


def test_summaries_and_what_each_file_learns(tmp_path):
    (tmp_path / "helpers.py").write_text(textwrap.dedent(HELPERS))
    (tmp_path / "models.py").write_text(textwrap.dedent(MODEL))
    train = textwrap.dedent(
        """
        import torch
        from helpers import evaluate, Runner
        from models import Probe

        def main(loader):
            model = Probe()
            runner = Runner()
            opt = torch.optim.Adam(model.head.parameters())
            with torch.no_grad():
                evaluate(model, loader)
                runner.step(model, 1)
            evaluate(model, loader)
        """
    )
    (tmp_path / "train.py").write_text(train)
    files = ProjectFiles(tmp_path.glob("*.py"))
    facts = facts_of(train, path="train.py")
    summary = summarize(facts, tmp_path / "train.py", files)
    helpers, models = file_key(tmp_path / "helpers.py"), file_key(tmp_path / "models.py")
    assert sorted((Path(p).name, n, c.line, c.mode or "") for p, n, c in summary.calls) == [
        ("helpers.py", "Runner", 0, ""),
        ("helpers.py", "Runner.step", 12, "disabled"),
        ("helpers.py", "evaluate", 0, ""),  # autograd on: no line needed
        ("helpers.py", "evaluate", 11, "disabled"),
        ("models.py", "Probe", 0, ""),
    ]
    assert summary.stepped == [(models, "Probe", "head")]
    assert Summary.from_json(summary.to_json()) == summary
    own = summarize(facts_of(HELPERS, path="helpers.py"), tmp_path / "helpers.py", files)
    assert own.functions == ["evaluate", "Runner.step", "report"]
    assert own.off_in_file == ["evaluate"]
    learned = incoming({file_key(tmp_path / "train.py"): summary, helpers: own, models: Summary()})
    assert set(learned[helpers].calls) == {"evaluate", "Runner.step"}
    assert learned[models].stepped == {"Probe": frozenset({"head"})}


LOOPS = """
import torch

def run_epoch(model, loader, *, criterion=None):
    for x in loader:
        model(x)

def fit(model, loader, optimizer):
    for x in loader:
        model(x).sum().backward()

@torch.no_grad()
def predict_all(model, loader):
    for x in loader:
        model(x)

class Runner:
    def sweep(self, loader, *, net):
        for x in loader:
            net(x)
"""


def test_helper_loops_are_summarized_and_told_to_callers_that_switch(tmp_path):
    (tmp_path / "loops.py").write_text(textwrap.dedent(LOOPS))
    files = ProjectFiles(tmp_path.glob("*.py"))
    own = summarize(facts_of(LOOPS, path="loops.py"), tmp_path / "loops.py", files)
    # Not `fit` (it asks for gradients) nor `predict_all` (autograd off).
    assert own.helper_loops == {
        "run_epoch": HelperLoop("loops.py", 5, "model", 0),
        "Runner.sweep": HelperLoop("loops.py", 19, "net", -1),
    }
    assert Summary.from_json(own.to_json()) == own
    call = cst.parse_expression("run_epoch(m, data)")
    assert own.helper_loops["run_epoch"].argument(call).value == "m"
    assert own.helper_loops["Runner.sweep"].argument(cst.parse_expression("r.sweep(data, net=m)")).value == "m"
    assert own.helper_loops["run_epoch"].argument(cst.parse_expression("run_epoch(*args)")) is None
    loops = file_key(tmp_path / "loops.py")
    caller = ExternalCall("train.py", 0, None, False)
    switching = Summary(calls=[(loops, "run_epoch", caller), (loops, "fit", caller)], switches=True)
    quiet = Summary(calls=[(loops, "run_epoch", caller)])
    learned = incoming({"train": switching, "other": quiet, loops: own})
    # Only a file that switches a model to eval mode learns of the loop.
    assert learned["train"].helper_loops == {(loops, "run_epoch"): own.helper_loops["run_epoch"]}
    assert "other" not in learned
