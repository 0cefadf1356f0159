"""detachlint never raises on hostile input: grammar-generated Python
(hypothesmith) and mutations of the fixtures. A short run here; the long run
is `python bench/fuzz.py --count 20000`."""

from __future__ import annotations

import pytest

from detachlint.registry import load_rules
from fuzz_inputs import MUTATIONS, check_one, mutants, seeds

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
