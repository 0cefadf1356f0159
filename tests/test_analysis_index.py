"""The index's own walk must see what libcst's visitor sees, in the same order."""

from __future__ import annotations

import subprocess
import sys

import libcst as cst
import pytest

from detachlint.analysis.index import FileIndex

from conftest import ROOT

SAMPLES = sorted(ROOT.glob("examples/*.py")) + sorted(ROOT.glob("rules/*.py")) + sorted(
    (ROOT / "detachlint").rglob("*.py")
)
KINDS = (cst.Name, cst.Call, cst.Attribute, cst.Assign, cst.For, cst.With, cst.FunctionDef, cst.ClassDef,
         cst.Decorator, cst.IfExp, cst.Lambda, cst.SimpleString, cst.Integer, cst.Subscript)


class _Recorder(cst.CSTVisitor):
    def __init__(self):
        self.seen = []

    def on_visit(self, node):
        if isinstance(node, KINDS):
            self.seen.append(node)
        return True


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_walk_matches_libcst_visitor(path):
    module = cst.parse_module(path.read_bytes())
    recorder = _Recorder()
    module.visit(recorder)
    index = FileIndex(module)
    ours = sorted((n for kind in KINDS for n in index.nodes(kind)), key=index.order.__getitem__)
    assert [id(n) for n in ours] == [id(n) for n in recorder.seen]


def _reference(module):
    """Parents, preorder ranges and scopes by a plain recursive walk."""
    from detachlint.analysis.index import children

    parents, order, end, scopes = {}, {}, {}, {}

    def visit(node, parent, scope):
        order[node] = len(order)
        scopes[node] = scope
        if parent is not None:
            parents[node] = parent
        inner = node if isinstance(node, (cst.FunctionDef, cst.Lambda)) else scope
        for child in children(node):
            visit(child, node, inner)
        end[node] = len(order)

    visit(module, None, module)
    return parents, order, end, scopes


@pytest.mark.parametrize("path", SAMPLES[:40], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_parents_ranges_and_scopes_of_every_node(path):
    # Leaves (names, numbers, strings) are closed without being entered: their
    # range must still be their own number, their scope the function around them.
    module = cst.parse_module(path.read_bytes())
    index = FileIndex(module)
    parents, order, end, scopes = _reference(module)
    assert list(index.order.items()) == list(order.items())
    assert index.end == end and index.parents == parents and index.scopes == scopes


def test_scopes_and_nesting():
    module = cst.parse_module("def f(a):\n    g = lambda b: b + a\n    return g\n")
    index = FileIndex(module)
    function = index.nodes(cst.FunctionDef)[0]
    lam = index.nodes(cst.Lambda)[0]
    names = {n.value: n for n in index.nodes(cst.Name) if n.value in ("b",)}
    assert index.scope_of(lam) is function
    assert index.scope_of(names["b"]) is lam
    assert index.scope_of(function) is module
    assert index.is_inside(names["b"], function) and not index.is_inside(function, lam)
    assert list(index.descendants(function, cst.Lambda)) == [lam]


def test_positions_are_libcsts_ranges_for_every_node():
    # Offsets recorded during one code generation, turned into lines and
    # columns on lookup, must give libcst's own PositionProvider ranges:
    # CRLF and lone CR newlines, a file without a final newline, comments,
    # continuation lines, decorators and an empty file.
    from libcst.metadata import MetadataWrapper, PositionProvider

    from detachlint.analysis.positions import positions

    sources = [
        "import torch\r\n\r\n# c\r\n@torch.no_grad()\r\ndef f(x):\r\n    return (x +\r\n            1)\r\n",
        "a = 1\rb = [1,\r  2]\r",
        "def f():\n    pass  # no newline at the end",
        "class A:\n    '''doc'''\n\n    @staticmethod\n    def g(y): return y; z = 2\n",
        "",
    ]
    for source in sources:
        module = cst.parse_module(source)
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        found = positions(module)
        assert set(found) == set(expected), source
        for node, where in expected.items():
            assert found[node] == where, (source, type(node).__name__)


def test_positions_one_statement_at_a_time_match_the_whole_module():
    # Regenerating only the statement that holds a node (top-level, or in a
    # definition's body), placed by Python's own parser, must give the
    # ranges the whole module gives:
    # leading comments, comments between decorators, semicolons, form feeds,
    # continuations, CR and CRLF newlines, a header comment, no final newline.
    from libcst.metadata import MetadataWrapper, PositionProvider

    from detachlint.analysis.positions import StatementPositions, positions

    sources = [
        "# header\n\nimport torch\r\n\r\n# c\r\n@torch.no_grad()\r\n# between\r\n@staticmethod\r\ndef f(x):\r\n    return (x +\r\n            1)\r\n",
        "a = 1\rb = [1,\r  2]\r",
        "x = 1; y = 2; z = \\\n  3\n\x0c\nif x: a = 1; b = 2\nelse:\n    pass\n# trailing comment",
        'class A:\n    """doc"""\n\n    @staticmethod\n    def g(y): return y; z = 2\n\n\n"""\nmulti\nline\n"""\nasync def h():\n    await g()\n',
        "# -*- coding: latin-1 -*-\ns = 'caf\xe9'\nt = s\n",
        # Inside definitions, one body statement at a time: tabs, a comment
        # at column 0 in a block, decorated and nested definitions, a
        # one-line class, `if` in a method, async methods.
        "class Net:\n\t# c\n\tscale = 2\n\n# at column 0\n\t@property\n\t# between\n\t@staticmethod\n"
        "\tdef f(x):\n\t\tdef inner(y):\n\t\t\treturn y; z = 1\n\t\tif x:\n\t\t\treturn inner(x)\n\t\treturn (x +\n\t\t\t1)\n"
        "\n\tasync def g(self):\n\t\tawait self.f(1)\nclass B: pass\ndef h():\n    class C:\n        a = 1\n    return C\n",
    ]
    for text in sources:
        source = text.encode("latin-1")
        module = cst.parse_module(source)
        index = FileIndex(module)
        found = positions(module, index.parents, source)
        assert isinstance(found, StatementPositions), text
        expected = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
        for node in index.parents:
            assert found[node] == expected[node], (text, type(node).__name__)
        assert module in found and module.body[-1] in found


def test_positions_fall_back_to_the_whole_module_when_python_cannot_parse():
    from detachlint.analysis.positions import StatementPositions, positions

    source = b"x = 1\ntype Y = int\n"  # newer syntax than this Python reads: libcst parses it
    module = cst.parse_module(source)
    found = positions(module, FileIndex(module).parents, source)
    assert not isinstance(found, StatementPositions)
    assert found[module.body[1]].start.line == 2


HASH_CHECK = r"""
import inspect, sys
import libcst as cst
from detachlint.analysis.index import hash_nodes_natively
from detachlint.engine import lint_source
from detachlint.registry import load_rules

rules = list(load_rules().values())
sources = [open(path, "rb").read() for path in sys.argv[1:]]
def findings():
    return [[(f.code, f.line, f.column, f.message, f.fix) for f in lint_source(s, "x.py", rules).findings] for s in sources]
before = findings()
hash_nodes_natively()
node_classes = [k for _, k in inspect.getmembers(cst, inspect.isclass) if issubclass(k, cst.CSTNode)]
assert len(node_classes) > 100 and all(k.__hash__ is object.__hash__ for k in node_classes)
name = cst.Name("x")
assert {name: 1}.get(cst.Name("x")) is None and {name: 1}[name] == 1  # still identity
assert findings() == before and any(before)
print("ok")
"""


def test_detachlint_processes_hash_nodes_in_c_with_the_same_findings():
    # In a process of its own: the call changes libcst's classes for good.
    examples = sorted(str(p) for p in (ROOT / "examples").glob("*.py")) + sorted(str(p) for p in (ROOT / "fixtures" / "DL201").glob("*.py"))
    out = subprocess.run([sys.executable, "-c", HASH_CHECK, *examples], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "ok", out.stderr


RECEIVERS = '''\
class Net:
    def forward(this, x):
        inner = lambda y: this.f(y)
        def shadow(this):
            return this
        return inner(x) + shadow(1)

    @classmethod
    def build(kls):
        return kls()

    @staticmethod
    def helper(a):
        return a


def snippet(self, batch):
    return self.model(batch)


def plain(model):
    return model
'''


def _name_reads(index, text):
    return [n for n in index.nodes(cst.Name) if n.value == text]


def test_the_instance_is_a_methods_first_parameter_whatever_its_name():
    index = FileIndex(cst.parse_module(RECEIVERS))
    this = _name_reads(index, "this")
    # `this` in `forward` and in the lambda inside it; not in `shadow`, which binds its own.
    in_forward = [n for n in this if index.receiver(n) == "this"]
    assert [n for n in this if index.is_receiver(n)] == in_forward
    assert len(in_forward) == 2  # forward's parameter and `this.f` in the lambda
    shadowed = [f for f in index.nodes(cst.FunctionDef) if f.name.value == "shadow"][0]
    assert index.receiver(shadowed) is None and index.instance_param(shadowed) is None
    build, helper, snippet, plain = (next(f for f in index.nodes(cst.FunctionDef) if f.name.value == n) for n in ("build", "helper", "snippet", "plain"))
    assert index.instance_param(build) == "kls" and index.instance_param(helper) is None
    # A function cut out of its class keeps `self` as a prior; any other first parameter is no instance.
    assert index.receiver(snippet) == "self" and index.instance_param(snippet) is None
    assert index.receiver(plain) is None and not any(index.is_receiver(n) for n in _name_reads(index, "model"))
