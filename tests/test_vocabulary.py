"""Torch's autograd vocabulary lives in detachlint/analysis/vocabulary.py only."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, List, Tuple

from detachlint.analysis import vocabulary

ROOT = Path(__file__).resolve().parent.parent
SCANNED = sorted([*(ROOT / "detachlint" / "analysis").glob("*.py"), *(ROOT / "rules").glob("*.py")])


def vocabulary_sets() -> dict:
    return {name: value for name, value in vars(vocabulary).items() if name.isupper() and isinstance(value, frozenset)}


def _strings(node: ast.AST) -> List[str]:
    """The words of a set, frozenset, tuple or list literal made of strings only."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set") and len(node.args) == 1:
        node = node.args[0]
    if not isinstance(node, (ast.Set, ast.Tuple, ast.List)):
        return []
    if not all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
        return []
    return [e.value for e in node.elts]


def word_literals(tree: ast.Module) -> Iterator[Tuple[int, List[str]]]:
    """Literals written as a set of words: a module-level constant, or the
    right side of `in` / `not in` anywhere. (Words added to or taken from a
    vocabulary set in an expression are the visible variants we want.)"""
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            yield node.lineno, _strings(node.value)
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for op, right in zip(node.ops, node.comparators):
                if isinstance(op, (ast.In, ast.NotIn)):
                    yield node.lineno, _strings(right)


def redefinitions(source: str, sets: dict) -> List[str]:
    found = []
    for line, words in word_literals(ast.parse(source)):
        if len(words) < 3:
            continue
        for name, known in sets.items():
            shared = len(set(words) & known)
            # Mostly vocabulary words, or most of a vocabulary set (of 4+ words:
            # three, like `argmax argmin argsort`, also sit in numpy's lists).
            if shared * 2 > len(words) or (len(known) >= 4 and shared * 2 > len(known)):
                found.append(f"line {line}: {sorted(words)} repeats vocabulary.{name}")
    return found


def test_no_vocabulary_set_is_defined_again_outside_vocabulary():
    sets = vocabulary_sets()
    problems = [
        f"{path.relative_to(ROOT)} {problem}"
        for path in SCANNED
        if path.name != "vocabulary.py"
        for problem in redefinitions(path.read_text(), sets)
    ]
    assert not problems, "\n".join(problems)


def test_the_check_sees_a_copied_set():
    copied = '_CASTS = {"to", "cuda", "cpu", "float"}\n'
    inline = 'def f(m):\n    return m in ("detach", "detach_", "item")\n'
    variant = 'from detachlint.analysis.vocabulary import COPYING_METHODS\n_KEEPING = COPYING_METHODS - {"type_as"}\n'
    sets = vocabulary_sets()
    assert any("DEVICE_DTYPE_CASTS" in p for p in redefinitions(copied, sets))
    assert redefinitions(inline, sets)
    assert not redefinitions(variant, sets)
    assert not redefinitions('_EVAL_WORDS = {"eval", "validate", "test"}\n', sets)


def test_qualified_number_builtins_cover_the_builtins_module_spelling():
    assert {"float", "builtins.float", "len", "builtins.len"} <= vocabulary.QUALIFIED_PYTHON_NUMBER_BUILTINS


def test_variants_keep_to_their_base_sets():
    assert vocabulary.DEVICE_DTYPE_CASTS < vocabulary.COPYING_METHODS
    assert vocabulary.GRAPH_CUTTING_ATTRIBUTES - vocabulary.NO_GRAPH_ATTRIBUTES == {"data"}
    assert "torch.set_grad_enabled" not in vocabulary.ENTERED_GRAD_MODE_MANAGERS
    assert "abs" not in vocabulary.NO_GRAPH_BUILTINS  # `abs(loss)` keeps its graph


def _loop_facts(source: str):
    import textwrap

    import libcst as cst

    from detachlint.analysis import Facts
    from detachlint.analysis.loops import LoopFacts

    facts = Facts(cst.parse_module(textwrap.dedent(source)))
    return facts, facts.shared("loops", LoopFacts)


def _call(facts, text: str):
    import libcst as cst

    return next(c for c in facts.index.nodes(cst.Call) if facts.module.code_for_node(c) == text)


def test_abs_of_a_loss_keeps_its_graph_while_float_of_it_does_not():
    facts, loops = _loop_facts(
        """
        import torch
        w = torch.ones(2, requires_grad=True)
        loss = (w * 3).sum()
        a = abs(loss)
        b = float(loss)
        """
    )
    assert not loops.has_no_graph(_call(facts, "abs(loss)"))
    assert loops.has_no_graph(_call(facts, "float(loss)"))
