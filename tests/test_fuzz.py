"""detachlint never raises on hostile input: grammar-generated Python
(hypothesmith) and mutations of the fixtures. A short run here; the long run
is `python bench/fuzz.py --count 20000`."""

from __future__ import annotations

import pytest

import json

from detachlint.registry import load_rules
from fuzz_inputs import MUTATIONS, check_one, mutants, seeds

from conftest import run_cli

RULES = list(load_rules().values())  # every rule, default-off ones too


@pytest.mark.parametrize("label,source", list(mutants(300, seed=1)), ids=lambda value: value if isinstance(value, str) else "")
def test_mutated_fixtures(label, source):
    check_one(source, RULES)


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.__name__)
def test_each_mutation_on_every_seed_shape(mutation):
    import random

    rng = random.Random(7)
    for source in seeds()[::25]:
        check_one(b"import torch\n" + mutation(source, rng), RULES)


DEEP = [
    b"(" * 5000 + b"x" + b")" * 5000,
    b"[" * 5000 + b"]" * 5000,
    b"x" + b" + x" * 20000,
    b"-" * 5000 + b"x",
    b"f(" * 5000 + b")" * 5000,
    b"x" + b".y" * 5000,
    b"a if b else " * 5000 + b"c",
]
EARLY_ERRORS = [b"\xef\xbb\xbf", b"def (:\n", b"print 'python 2'\n"]


@pytest.mark.parametrize("early", EARLY_ERRORS, ids=["second BOM", "bad def", "python 2"])
@pytest.mark.parametrize("deep", DEEP, ids=range(len(DEEP)))
def test_deep_nesting_after_an_early_syntax_error_is_reported_not_a_crash(tmp_path, early, deep):
    # Found by the long fuzz run: Python's parser stopped at the early error,
    # so its depth limits never saw the nesting, which overflowed the C stack
    # of libcst's parser. A subprocess, so that a crash fails this test only.
    path = tmp_path / "deep.py"
    path.write_bytes(b"\xef\xbb\xbf" + early + b"import torch\nvalue = " + deep + b"\n")
    result = run_cli("check", str(path), "--no-cache", "--format", "json")
    assert result.returncode == 1, result.stderr
    assert [f["code"] for f in json.loads(result.stdout)] == ["DL000"]


hypothesis = pytest.importorskip("hypothesis")
hypothesmith = pytest.importorskip("hypothesmith")


@hypothesis.settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=list(hypothesis.HealthCheck),
    derandomize=True,
)
@hypothesis.given(hypothesmith.from_grammar())
def test_grammar_generated_source(text):
    check_one(("import torch\n" + text).encode("utf-8", "surrogatepass"), RULES)
