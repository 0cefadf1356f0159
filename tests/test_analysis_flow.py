"""Control flow (`analysis/flow.py`): which assignments reach a read, over
branches, loops, jumps and handlers; and what rules gain from it."""

from __future__ import annotations

import textwrap
from typing import List, Tuple

import libcst as cst
import pytest

from detachlint.analysis import Facts
from detachlint.api import CheckOptions, check
from detachlint.config import Selection


def facts_of(source: str) -> Facts:
    return Facts(cst.parse_module(textwrap.dedent(source)))


def read_on(facts: Facts, marker: str, name: str) -> cst.Name:
    """The read of `name` on the line that ends with `# marker`."""
    lines = facts.module.code.splitlines()
    line = next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith("# " + marker))
    reads = [n for n in facts.index.nodes(cst.Name) if n.value == name and facts.line_of(n) == line]
    assert reads, f"no read of {name} on line {line}"
    return reads[-1]


def reaching(source: str, marker: str, name: str) -> Tuple[List[int], List[int]]:
    """Lines of the bindings that reach the read (on entering its loops),
    and of those that reach it only from a loop's previous pass."""
    facts = facts_of(source)
    read = read_on(facts, marker, name)
    scope = facts.values.scope(read)
    return (
        sorted(facts.line_of(b) for b, _ in scope.reaching(read)),
        sorted(facts.line_of(b) for b, _ in scope.loop_carried(read)),
    )


def test_an_assignment_in_one_arm_does_not_reach_the_other():
    source = """
    def f(model, x, c):
        out = model(x)
        if c:
            out = out.detach()
        else:
            out.mul_(2)  # else
        return out  # after
    """
    assert reaching(source, "else", "out") == ([3], [])
    assert reaching(source, "after", "out") == ([3, 5], [])


def test_break_and_return_end_what_reaches_the_rest_of_the_body():
    source = """
    def f(loader, model):
        out = None
        for x in loader:
            if x is None:
                out = x
                break
            use(out)  # body
            if x == 0:
                out = model(x)
                return out
        return out  # after
    """
    assert reaching(source, "body", "out") == ([3], [])
    assert reaching(source, "after", "out") == ([3, 6], [])


def test_a_binding_before_continue_reaches_the_next_pass():
    source = """
    def f(loader, criterion, model):
        total = 0
        for x, y in loader:
            use(loss)  # start
            if x is None:
                loss = 0.0
                continue
            loss = criterion(model(x), y)
    """
    assert reaching(source, "start", "loss") == ([], [7, 9])


def test_an_assignment_that_reads_its_own_name_carries_the_previous_pass():
    source = """
    def f(loader, criterion, model):
        total = 0.0
        for x, y in loader:
            total = total + criterion(model(x), y)  # sum
    """
    assert reaching(source, "sum", "total") == ([3], [5])


def test_a_value_rebound_on_every_pass_is_not_carried():
    source = """
    def f(loader, model):
        for x in loader:
            out = model(x)
            use(out)  # read
            out = out.detach()
    """
    assert reaching(source, "read", "out") == ([4], [])


# `out = None` in the handler comes last in the source, but the loop
# leaves only through the `break` after `out = model(x)`.
RETRY = """
import torch

def forward_with_retry(model, x, optimizer):
    while True:
        try:
            out = model(x)
            break
        except RuntimeError:
            out = None
    out.data.zero_()  # after
    return out
"""


def test_the_loop_target_reaches_its_body_and_while_true_leaves_only_by_break():
    source = """
    def f(batches):
        for batch in batches:
            use(batch)  # target
    """
    assert reaching(source, "target", "batch") == ([3], [])
    assert reaching(RETRY, "after", "out") == ([7], [])


def test_try_handlers_see_the_body_and_the_loop_else_only_exhaustion():
    source = """
    def f(model, x, items):
        out = None
        try:
            out = model(x)
            out = out.detach()
        except RuntimeError:
            use(out)  # handler
        for item in items:
            found = item
            break
        else:
            found = None
        return found  # after
    """
    assert reaching(source, "handler", "out") == ([3, 5, 6], [])
    assert reaching(source, "after", "found") == ([10, 13], [])


def test_walrus_class_bodies_and_match_cases():
    source = """
    def f(model, x, kind):
        if (out := model(x)) is not None:
            use(out)  # walrus
        match kind:
            case "detach":
                out = out.detach()
            case _:
                pass
        return out  # after

    class Config:
        scale = 2
        double = scale * 2  # class
    """
    assert reaching(source, "walrus", "out") == ([3], [])
    assert reaching(source, "after", "out") == ([3, 7], [])
    assert reaching(source, "class", "scale") == ([13], [])


def findings(tmp_path, source: str) -> List[Tuple[str, int]]:
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(source))
    run = check([str(path)], CheckOptions(no_cache=True, selection=Selection(select=["ALL"])))
    return sorted((f.code, f.line) for f in run.findings)


def test_a_loss_made_a_number_in_one_arm_still_backpropagates_in_the_other(tmp_path):
    # `loss = loss.item()` runs only on logging steps: the `else` arm's
    # `loss` is the criterion's output, so its `backward()` is right.
    source = """
    import torch

    def train(model, loader, criterion, optimizer):
        running = 0.0
        for step, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            if step % 10 == 0:
                loss = loss.item()
                running += loss
            else:
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        return running
    """
    assert findings(tmp_path, source) == []


def test_a_data_edit_after_a_retry_loop_sees_the_model_output(tmp_path):
    assert findings(tmp_path, RETRY) == [("DL101", 11)]


@pytest.mark.parametrize("body", ["x = 1", "pass", "return x", "lambda: (y := 1)"])
def test_every_scope_shape_builds(body):
    facts = facts_of(f"def f(x):\n    {body}\n")
    for name in facts.index.nodes(cst.Name):
        facts.values.scope(name).reaching(name)


def test_a_whole_line_or_block_is_asked_at_its_first_statement():
    facts = facts_of(
        """
        def f(x):
            y = x ** 2
            if x is not None:
                x.data *= 100
            y.backward()
        """
    )
    scope = facts.values.scope(facts.index.nodes(cst.If)[0])
    edit = facts.index.nodes(cst.AugAssign)[0]
    line = facts.index.parent(edit)
    block = facts.index.parent(line)
    for at in (line, block, facts.index.nodes(cst.If)[0]):
        entry = scope.assignment_before("y", at)
        assert entry is not None and facts.line_of(entry[1]) == 3


JOINED = """
import torch

def predict(model, x, keep_graph, fast):
    if keep_graph:
        out = model(x)
    else:
        out = model(x).detach()
    print(out)  # one arm
    if fast:
        cut = model(x).detach()
    else:
        with torch.no_grad():
            cut = model(x)
    print(cut)  # both arms
    scheduler = None
    if fast:
        scheduler = torch.optim.lr_scheduler.StepLR(torch.optim.SGD(model.parameters(), lr=0.1), 10)
    print(scheduler)  # a scheduler
"""


def test_what_a_name_holds_joins_its_reaching_bindings():
    """A graph on either arm may reach the read; a cut holds only when both arms made it."""
    from detachlint.analysis.values import GRAD, Holds

    facts = facts_of(JOINED)
    one_arm = facts.values.holds(read_on(facts, "one arm", "out"))
    assert one_arm & Holds.ACTIVATION and not one_arm & Holds.DETACHED
    both_arms = facts.values.holds(read_on(facts, "both arms", "cut"))
    assert both_arms & Holds.DETACHED and not both_arms & GRAD
    # A learning-rate scheduler is built under `torch.optim` but steps no parameter.
    assert not facts.values.holds(read_on(facts, "a scheduler", "scheduler")) & Holds.OPTIMIZER
