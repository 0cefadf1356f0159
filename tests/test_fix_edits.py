"""A finding's fix is described by regenerating only the statement
that holds it; the edit must be exactly the one the whole file's
regeneration gives."""

from __future__ import annotations

import libcst as cst
import pytest

from conftest import ROOT

from detachlint.engine import check_module, parse
from detachlint.fixing import FixDescriber, apply_replace, text_edit
from detachlint.registry import load_rules

RULES = list(load_rules().values())
FILES = sorted(ROOT.glob("fixtures/*/*.py")) + sorted(ROOT.glob("examples/*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_local_fix_edits_equal_whole_file_edits(path):
    source = path.read_bytes()
    module, error = parse(source, str(path))
    assert module is not None, error
    checked = check_module(module, source, str(path), RULES)
    describer = FixDescriber(checked.module, checked.facts.names, checked.facts.positions, checked.facts.index.parents)
    for report, _, _ in checked.reports:
        if report.fix is None:
            continue
        whole = text_edit(checked.module.code, apply_replace(checked.module, checked.facts.names, report.fix).code)
        assert describer.describe(report.fix, "fix").edits == (whole,), report.message


def test_a_fix_in_a_long_file_edits_only_its_own_lines():
    unit = (ROOT / "examples" / "train.py").read_text()
    source = (unit * 40).encode()
    module, _ = parse(source, "long.py")
    checked = check_module(module, source, "long.py", RULES)
    describer = FixDescriber(checked.module, checked.facts.names, checked.facts.positions, checked.facts.index.parents)
    fixes = [report for report, _, _ in checked.reports if report.fix is not None]
    assert len(fixes) >= 40
    last = fixes[-1]
    edit = describer.describe(last.fix, "fix").edits[0]
    line = checked.facts.positions[last.fix.old].start.line
    assert edit.line >= line - 1 and edit.end_line - edit.line < 20


LAYOUTS = {
    "tabs": "import torch\n\ndef f(x):\n\tif x is not None:\n\t\ty = torch.autograd.Variable(x)\n\t\treturn y\n",
    "crlf": "import torch\r\n\r\ndef f(x):\r\n    # note\r\n    y = torch.autograd.Variable(x)\r\n    return y\r\n",
    "else-except-finally": (
        "import torch\n\n"
        "def f(x, flag):\n    try:\n        if flag:\n            pass\n        elif x:\n            a = torch.autograd.Variable(x)\n"
        "        else:\n            b = torch.autograd.Variable(x)\n    except ValueError:\n        c = torch.autograd.Variable(x)\n"
        "    finally:\n        d = (torch.autograd.Variable(x),\n   torch.autograd.Variable(x))\n"
    ),
    "decorated": "import torch\n\n@torch.no_grad()\n\n# between\n@staticmethod\ndef f(x=torch.autograd.Variable(torch.ones(1))):\n    return torch.autograd.Variable(x)\n",
    "one-line-suite": "import torch\n\nclass A:\n    def f(self, x): return torch.autograd.Variable(x)\n",
    "eval-loop-in-else": (
        "import torch\nfrom torch import nn\n\ndef evaluate(model: nn.Module, loader, quick):\n    model.eval()\n"
        "    if quick:\n        return 0\n    else:\n        total = 0\n        for x, y in loader:\n"
        "            total += (model(x).argmax(1) == y).sum().item()\n        return total\n"
    ),
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_a_fix_regenerated_at_its_statement_matches_the_whole_file(name):
    # Each edit comes from regenerating only the innermost statement at its
    # indentation; tabs, CRLF, elif/except/finally blocks, continuation lines,
    # decorators and one-line suites must give the whole file's edit exactly.
    source = LAYOUTS[name].encode()
    module, error = parse(source, f"{name}.py")
    assert module is not None, error
    checked = check_module(module, source, f"{name}.py", RULES)
    describer = FixDescriber(checked.module, checked.facts.names, checked.facts.positions, checked.facts.index.parents)
    fixes = [report for report, _, _ in checked.reports if report.fix is not None]
    assert fixes
    for report in fixes:
        whole = text_edit(checked.module.code, apply_replace(checked.module, checked.facts.names, report.fix).code)
        assert describer.describe(report.fix, "fix").edits == (whole,), report.message


@pytest.mark.parametrize("uses", [1, 2, 3])
def test_a_fix_that_drops_an_import_stays_local_while_other_uses_remain(uses):
    # DL701 drops `from torch.autograd import Variable` with its last use:
    # before that, its edit is the one statement; at the last, the import too.
    lines = ["import torch", "from torch.autograd import Variable", "", "", "def f(x):"]
    lines += [f"    y{i} = Variable(torch.zeros({i + 1}))" for i in range(uses)]
    lines += ["    return x", ""]
    source = "\n".join(lines).encode()
    module, _ = parse(source, "vars.py")
    checked = check_module(module, source, "vars.py", RULES)
    describer = FixDescriber(checked.module, checked.facts.names, checked.facts.positions, checked.facts.index.parents)
    fixes = [report.fix for report, _, _ in checked.reports if report.fix is not None and report.fix.drop_unused]
    assert len(fixes) == uses
    for fix in fixes:
        edit = describer.describe(fix, "fix").edits[0]
        whole = text_edit(checked.module.code, apply_replace(checked.module, checked.facts.names, fix).code)
        assert edit == whole
        assert (edit.line <= 2) == (uses == 1)


def test_a_removed_line_is_described_by_the_statement_around_it():
    # `x = Variable(x)` goes rather than becoming `x = x`; with `Variable`
    # still used elsewhere the import stays, and the edit is the loop's.
    source = (
        "import torch\nfrom torch.autograd import Variable\n\n\n"
        "def f(loader):\n    for x in loader:\n        x = Variable(x)\n        y = Variable(torch.zeros(1))\n    return y\n\n"
        "z = torch.ones(2)\nz = Variable(z)\nw = Variable(torch.zeros(1))\n"
    ).encode()
    module, _ = parse(source, "vars.py")
    checked = check_module(module, source, "vars.py", RULES)
    describer = FixDescriber(checked.module, checked.facts.names, checked.facts.positions, checked.facts.index.parents)
    removals = [r.fix for r, _, _ in checked.reports if r.fix is not None and isinstance(r.fix.new, cst.RemovalSentinel)]
    assert len(removals) == 2
    for fix in removals:
        whole = text_edit(checked.module.code, apply_replace(checked.module, checked.facts.names, fix).code)
        assert describer.describe(fix, "fix").edits == (whole,)


LEGACY_LOOP = '''\
import torch
from torch.autograd import Variable


def train(model, loader, optimizer, criterion, weights):
    for x, y in loader:
{wrapped}
        nested = Variable(Variable(x))
        loss = criterion(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
'''


def test_one_fix_run_applies_every_fix_of_a_legacy_file_rounds_apart(monkeypatch):
    from detachlint import fixer

    wrapped = "\n".join(f"        w{i} = Variable(weights[{i}])" for i in range(60))
    source = LEGACY_LOOP.format(wrapped=wrapped).encode()
    rounds = []
    real_parse = fixer.parse
    monkeypatch.setattr(fixer, "parse", lambda *args: rounds.append(1) or real_parse(*args))
    fixed = fixer.fix_source(source, "legacy.py", RULES, unsafe=True)
    text = fixed.source.decode()
    # The 60 wrappers and the outer nested one in one round, the inner one
    # in the next (it lay inside the outer), then a round that finds none.
    assert fixed.applied == 62 and len(rounds) == 3
    assert "Variable" not in text  # the last use gone, its import too
    assert "        w59 = weights[59].detach()\n        nested = x\n" in text
    compile(text, "legacy.py", "exec")
    module, _ = parse(fixed.source, "legacy.py")
    again = check_module(module, fixed.source, "legacy.py", RULES)
    assert [r.code for r, _, _ in again.reports if r.fix is not None] == []
