"""Every rule over every `.py` file of real trees, prefilter or not:
`python bench/realcode.py ROOT ... [--jobs N]`.

Counts files, lines, DL000s (files that do not parse on this Python, e.g.
Python 2 test data) and internal errors (a rule or the engine raising),
and lists every internal error with its file. Each file runs in a pool
worker, so a file that kills the interpreter is reported too. Not part of
the test suite.
"""

from __future__ import annotations

import argparse
import multiprocessing
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
    result = lint_source(source, path, RULES, prefilter=False)
    parse_errors = sum(f.code == PARSE_ERROR_CODE for f in result.findings)
    return path, source.count(b"\n"), len(result.findings) - parse_errors, parse_errors, result.errors


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("roots", nargs="+")
    parser.add_argument("--jobs", type=int, default=multiprocessing.cpu_count())
    args = parser.parse_args()
    files = sorted(str(p) for root in args.roots for p in Path(root).rglob("*.py") if p.is_file())
    started = time.perf_counter()
    lines = findings = unparsed = 0
    errors = []
    done = set()
    try:
        # A worker that dies breaks this pool loudly (a multiprocessing.Pool would hang).
        with ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("fork")) as pool:
            for path, count, found, parse_errors, internal in pool.map(_lint, files, chunksize=8):
                done.add(path)
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
    return 1 if errors or len(done) != len(files) else 0


if __name__ == "__main__":
    raise SystemExit(main())
