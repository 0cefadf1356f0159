"""What keeps a reproduction cheap without changing what it shows: the
runtime's own AST walk and parse (`standins.walk`, `standins.parse_at`), and
DL701's probe not running the code a second time when nothing it made up
could change (in-process, on specs built from small files)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from conftest import line_of

from detachlint.engine import lint_source
from detachlint.registry import load_rules

torch = pytest.importorskip("torch")

from detachlint.verify.extract import build_spec  # noqa: E402
from detachlint.verify.runtime.standins import parse_at, walk  # noqa: E402
from detachlint.verify.runtime.verdict import PROBES, run_probe  # noqa: E402

SOURCE = '''
class Trainer:
    """Docstring."""

    def step(self, batch, *rest, scale=2.0, **options):
        total = [x * scale for x in batch if x]
        with open(options.get("path", "f")) as handle:
            print(f"{handle.name!r:>10} {total}")
        return lambda y: {k: v for k, v in zip(total, rest)} or y
'''


def test_walk_yields_the_nodes_of_ast_walk_in_the_same_order():
    tree = ast.parse(SOURCE)
    assert [id(node) for node in walk(tree)] == [id(node) for node in ast.walk(tree)]


def test_walk_queues_a_nodes_children_before_yielding_it():
    # As ast.walk: a child replaced once its parent is yielded is still the old one walked.
    tree = ast.parse("a = b + c")
    names = []
    for node in walk(tree):
        if isinstance(node, ast.BinOp):
            node.left = ast.Name("replaced", ast.Load())
        elif isinstance(node, ast.Name):
            names.append(node.id)
    assert names == ["a", "b", "c"]


def test_parse_at_numbers_lines_as_renumbering_after_the_parse():
    expected = ast.parse(SOURCE)
    ast.increment_lineno(expected, 40)
    assert ast.dump(parse_at(SOURCE, 41), include_attributes=True) == ast.dump(expected, include_attributes=True)


def test_parse_at_reports_a_syntax_error_as_the_text_alone_does():
    text = "x = 1\ndef broken(:\n"
    with pytest.raises(SyntaxError) as plain:
        ast.parse(text)
    with pytest.raises(SyntaxError) as shifted:
        parse_at(text, 30)
    assert (shifted.value.lineno, shifted.value.msg) == (plain.value.lineno, plain.value.msg)


SCRIPT_LABELS = """
import torch
from torch import nn
from torch.autograd import Variable
from torch.utils.data import DataLoader

critic = nn.Sequential(nn.Linear(6, 1), nn.Sigmoid())
samples = DataLoader(torch.load("points.pt"), batch_size=4)
Tensor = torch.FloatTensor

for points in samples:
    ones = Variable(Tensor(points.size(0), 1).fill_(1.0), requires_grad=False)
    score = nn.functional.binary_cross_entropy(critic(points), ones)
"""


FUNCTION_LABELS = """
import torch
from torch.autograd import Variable


def targets_for(points):
    ones = Variable(points.new(points.size(0), 1).fill_(1.0), requires_grad=False)
    return ones * points.sum()
"""


def _probe_counting_runs(tmp_path, monkeypatch, source, marker):
    """The DL701 probe's result on the finding at `marker`, and how many
    times it ran the reproduction (calls of `find_working`)."""
    text = textwrap.dedent(source).lstrip("\n")
    path = tmp_path / "labels.py"
    path.write_text(text, encoding="utf-8")
    findings = lint_source(path.read_bytes(), str(path), [load_rules()[code] for code in ("DL701", "DL702")]).findings
    (finding,) = [f for f in findings if f.line == line_of(source, marker)]
    spec = build_spec(finding, text)
    spec["project"] = {"paths": [], "package": ""}
    probe = PROBES["DL701"]
    # The probe DL701 and DL702 share lives in the runtime: count its runs there.
    from detachlint.verify.runtime import variable_probe

    module = vars(variable_probe)
    runs = []
    original = module["find_working"]

    def counted(*args, **kwargs):
        runs.append(kwargs.get("around"))
        return original(*args, **kwargs)

    monkeypatch.setitem(module, "find_working", counted)
    monkeypatch.chdir(tmp_path)
    return run_probe(probe, spec, 20), len(runs)


def test_dl701_does_not_run_again_when_the_run_made_up_no_input(tmp_path, monkeypatch):
    # The script's only outside values are its data source's batches, made as it iterates them.
    result, runs = _probe_counting_runs(tmp_path, monkeypatch, SCRIPT_LABELS, "ones = Variable")
    assert (result["status"], result["basis"]) == ("confirmed", "user-code"), result
    assert "the run made up no input that could have given it one" in result["evidence"]
    assert runs == 1


def test_dl701_runs_again_when_the_run_made_up_an_input(tmp_path, monkeypatch):
    # `points` is a made-up argument: the second run, with it requiring grad, still decides.
    result, runs = _probe_counting_runs(tmp_path, monkeypatch, FUNCTION_LABELS, "ones = Variable")
    assert (result["status"], result["basis"]) == ("confirmed", "user-code"), result
    assert "also with the run's 1 made-up input requiring grad" in result["evidence"]
    assert runs == 2


def test_analyses_kept_for_an_attempt_are_handed_out_as_copies():
    from detachlint.verify.runtime.synthesis import aliases_in, calls_in_order, forget_analyses

    function = ast.parse("def f(x):\n    y = x.view(2, -1)\n    return g(y)\n").body[0]
    forget_analyses()
    first, again = aliases_in(function), aliases_in(function)
    assert first == again and first is not again and list(first) == ["y"]
    calls = calls_in_order(function)
    calls.clear()  # a caller's change stays its own
    assert [ast.unparse(call) for call in calls_in_order(function)] == ["x.view(2, -1)", "g(y)"]
    # Another tree (a new attempt's) is analysed afresh, not taken for the first.
    other = ast.parse("def f(x):\n    z = x\n").body[0]
    assert list(aliases_in(other)) == ["z"]
