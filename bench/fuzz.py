"""The long fuzz run: `python bench/fuzz.py [--count 20000] [--seed 0] [--grammar 2000]`.

Feeds mutated fixtures (tests/fuzz_inputs.py) and hypothesmith's
grammar-generated programs through every rule and the fixer, and checks
that nothing raises, internal errors never happen, JSON output parses and
fixes always parse. Prints counts and every failure with its input saved
under bench/.fuzz-failures/. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests")]

from detachlint.registry import load_rules  # noqa: E402
from fuzz_inputs import check_one, mutants  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=20000, help="mutated inputs")
    parser.add_argument("--grammar", type=int, default=2000, help="grammar-generated programs")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rules = list(load_rules().values())
    failures_dir = HERE / ".fuzz-failures"
    failures = 0
    start = time.perf_counter()

    def record(label: str, source: bytes) -> None:
        nonlocal failures
        failures += 1
        failures_dir.mkdir(exist_ok=True)
        (failures_dir / f"{failures}.py").write_bytes(source)
        print(f"FAIL {label}: saved {failures_dir / f'{failures}.py'}\n{traceback.format_exc()}", file=sys.stderr)

    for label, source in mutants(args.count, seed=args.seed):
        try:
            check_one(source, rules)
        except Exception:
            record(label, source)
    grammar = 0
    if args.grammar:
        import hypothesis
        import hypothesmith

        @hypothesis.settings(max_examples=args.grammar, deadline=None, database=None,
                             suppress_health_check=list(hypothesis.HealthCheck))
        @hypothesis.given(hypothesmith.from_grammar())
        def run(text):
            nonlocal grammar
            grammar += 1
            source = ("import torch\n" + text).encode("utf-8", "surrogatepass")
            try:
                check_one(source, rules)
            except Exception:
                record(f"grammar #{grammar}", source)

        run()
    seconds = time.perf_counter() - start
    print(f"{args.count} mutated inputs and {grammar} grammar-generated programs in {seconds:.0f} s: {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
