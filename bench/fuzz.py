"""The long fuzz run: `python bench/fuzz.py [--count 20000] [--seed 0] [--grammar 2000]`.

Feeds mutated fixtures (tests/fuzz_inputs.py) and hypothesmith's
grammar-generated programs through every rule and the fixer, and checks
that nothing raises, internal errors never happen, JSON output parses and
fixes always parse. Not part of the test suite.

The inputs run in a worker process that this script supervises, so an
input that kills the interpreter (a native crash) or hangs it (no progress
within --stall seconds) is a reported failure like any exception, and the
run goes on after it. Every failing input is saved under
bench/.fuzz-failures/ and named on stderr.
"""

from __future__ import annotations

import argparse
import base64
import queue
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests")]

from fuzz_inputs import check_one, mutants  # noqa: E402

FAILURES_DIR = HERE / ".fuzz-failures"


def _encode(source: bytes) -> str:
    return base64.b64encode(source).decode("ascii")


def work(args: argparse.Namespace) -> int:
    """The worker: runs inputs from --start on, announcing each on stdout
    before it runs (`mutant I` or `grammar B64`), then `fail B64 LABEL` if
    it raised; `done` at the end."""
    from detachlint.registry import load_rules

    rules = list(load_rules().values())

    def say(*words: str) -> None:
        print(*words, flush=True)

    def check(label: str, source: bytes) -> None:
        try:
            check_one(source, rules)
        except Exception:
            traceback.print_exc()
            say("fail", _encode(source), label)

    if args.start < args.count:
        for index, (label, source) in enumerate(mutants(args.count, seed=args.seed)):
            if index >= args.start:
                say("mutant", str(index))
                check(label, source)
    if args.grammar:
        import hypothesis
        import hypothesmith

        @hypothesis.seed(args.grammar_seed)
        @hypothesis.settings(max_examples=args.grammar, deadline=None, database=None,
                             suppress_health_check=list(hypothesis.HealthCheck))
        @hypothesis.given(hypothesmith.from_grammar())
        def run(text):
            source = ("import torch\n" + text).encode("utf-8", "surrogatepass")
            say("grammar", _encode(source))
            check("grammar", source)

        run()
    say("done")
    return 0


def _lines(stream, into: queue.Queue) -> None:
    for line in stream:
        into.put(line.rstrip("\n"))
    into.put(None)


def supervise(args: argparse.Namespace) -> int:
    failures = 0

    def record(label: str, source: bytes, why: str) -> None:
        nonlocal failures
        failures += 1
        FAILURES_DIR.mkdir(exist_ok=True)
        saved = FAILURES_DIR / f"{failures}.py"
        saved.write_bytes(source)
        print(f"FAIL {label}: {why}; saved {saved}", file=sys.stderr, flush=True)

    start = time.perf_counter()
    next_mutant, grammar_seen, grammar_left, restarts = 0, 0, args.grammar, 0
    while True:
        worker = subprocess.Popen(
            [sys.executable, __file__, "--worker", "--start", str(next_mutant), "--count", str(args.count),
             "--grammar", str(grammar_left), "--seed", str(args.seed),
             "--grammar-seed", str(args.seed + restarts)],
            stdout=subprocess.PIPE, text=True,
        )
        lines: queue.Queue = queue.Queue()
        threading.Thread(target=_lines, args=(worker.stdout, lines), daemon=True).start()
        current, finished, stalled = None, False, False
        while True:
            try:
                line = lines.get(timeout=args.stall)
            except queue.Empty:
                stalled = True
                worker.kill()
                break
            if line is None:
                break
            word, _, rest = line.partition(" ")
            if word == "mutant":
                current = ("mutant", int(rest))
                next_mutant = int(rest) + 1
            elif word == "grammar":
                current = ("grammar", base64.b64decode(rest))
                grammar_seen += 1
                grammar_left -= 1
            elif word == "fail":
                encoded, _, label = rest.partition(" ")
                record(label, base64.b64decode(encoded), "raised (traceback above)")
            elif word == "done":
                finished = True
        code = worker.wait()
        if finished:
            break
        if current is None:
            print(f"the fuzz worker failed before its first input (exit {code})", file=sys.stderr)
            return 2
        why = f"no progress in {args.stall:.0f} s" if stalled else _exit_reason(code)
        if current[0] == "mutant":
            *_, (label, source) = mutants(current[1] + 1, seed=args.seed)
        else:
            label, source = "grammar", current[1]
        record(label, source, why)
        # Go on after the input that stopped the worker; a grammar phase
        # starts again on a new seed so it does not replay the same program.
        restarts += current[0] == "grammar"
    seconds = time.perf_counter() - start
    print(f"{args.count} mutated inputs and {grammar_seen} grammar-generated programs in {seconds:.0f} s: {failures} failures")
    return 1 if failures else 0


def _exit_reason(code: int) -> str:
    if code < 0:
        try:
            return f"the interpreter died ({signal.Signals(-code).name})"
        except ValueError:
            return f"the interpreter died (signal {-code})"
    return f"the interpreter exited with {code}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=20000, help="mutated inputs")
    parser.add_argument("--grammar", type=int, default=2000, help="grammar-generated programs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stall", type=float, default=120.0, help="seconds one input may take before it counts as a hang")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--grammar-seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    return work(args) if args.worker else supervise(args)


if __name__ == "__main__":
    raise SystemExit(main())
