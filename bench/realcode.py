"""Every rule over every `.py` file of real trees, prefilter or not:
`python bench/realcode.py ROOT ... [--jobs N]`.

Counts files, lines, DL000s (files that do not parse on this Python, e.g.
Python 2 test data) and internal errors (a rule or the engine raising),
and lists every internal error with its file, then the files that took
longest (`--slowest N`, with their time per 1,000 lines: a file far above
the others shows a cost that grows faster than the code). Each file runs
in a pool worker, so a file that kills the interpreter is reported too.
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from detachlint.engine import PARSE_ERROR_CODE, lint_source  # noqa: E402
from detachlint.registry import load_rules  # noqa: E402

RULES = list(load_rules().values())


def _lint(path: str):
    source = Path(path).read_bytes()
    started = time.perf_counter()
    try:
        result = lint_source(source, path, RULES, prefilter=False)
    except Exception as error:  # the engine itself raised: report it with the file
        return path, source.count(b"\n"), 0, 0, [f"{path}: {type(error).__name__}: {error}"], time.perf_counter() - started
    seconds = time.perf_counter() - started
    parse_errors = sum(f.code == PARSE_ERROR_CODE for f in result.findings)
    return path, source.count(b"\n"), len(result.findings) - parse_errors, parse_errors, result.errors, seconds


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("roots", nargs="+")
    parser.add_argument("--jobs", type=int, default=multiprocessing.cpu_count())
    parser.add_argument("--slowest", type=int, default=10, help="list the N files that took longest")
    args = parser.parse_args()
    files = sorted(str(p) for root in args.roots for p in Path(root).rglob("*.py") if p.is_file())
    started = time.perf_counter()
    lines = findings = unparsed = 0
    errors = []
    done = set()
    timed = []
    try:
        # A worker that dies breaks this pool loudly (a multiprocessing.Pool would hang).
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            for path, count, found, parse_errors, internal, spent in pool.map(_lint, files, chunksize=8):
                done.add(path)
                timed.append((spent, count, path))
                lines += count
                findings += found
                unparsed += parse_errors
                errors += internal
    except Exception as error:
        errors.append(f"the run stopped: {type(error).__name__}: {error}")
    seconds = time.perf_counter() - started
    print(f"roots: {', '.join(args.roots)}")
    print(f"files: {len(done)} of {len(files)}, lines: {lines:,}, findings (every rule): {findings}, "
          f"DL000: {unparsed}, internal errors: {len(errors)}, {seconds:.0f} s")
    for error in errors:
        print(f"  {error}")
    if timed and args.slowest:
        print(f"\nslowest {args.slowest} files (median over all files: "
              f"{statistics.median(1000 * s / max(n, 1) for s, n, _ in timed) * 1000:.0f} ms per 1k lines):")
        for spent, count, path in sorted(timed, reverse=True)[:args.slowest]:
            print(f"  {spent:6.2f} s  {count:6d} lines  {1000 * spent / max(count, 1) * 1000:7.0f} ms per 1k lines  {path}")
    return 1 if errors or len(done) != len(files) else 0


if __name__ == "__main__":
    raise SystemExit(main())
