"""How detachlint's cost grows with the size of one file.

    python bench/scaling.py [--runs 3] [--max-copies 128] [--big-mb 5]

Builds files made of N copies of `examples/train.py` (N = 4, 8, ... up to
`--max-copies`) and times, in a fresh process per file, the bare libcst parse
and the whole lint (parse, analysis, rules, fix descriptions; no cache),
after one lint of `examples/models.py` in the same process pays its start-up.
Prints per N: lines, parse and lint medians, time per 1,000 lines, the ratio
of the analysis (lint minus parse) to the parse, and the lint's peak memory
(parse and lint run in separate processes). Then lints one generated file of
`--big-mb` megabytes once, with its time and peak memory: a file over 128 KiB
is analysed a section at a time (`detachlint/sections.py`).
Linear cost shows as a flat "ms per 1k lines" column. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
UNIT = ROOT / "examples" / "train.py"
WARM_UP = ROOT / "examples" / "models.py"

# Runs in the child: one file, the bare parse or the lint (each in its own
# process, so the peak memory is the lint's own), its time as JSON.
CHILD = r"""
import json, resource, sys, time
import libcst
from detachlint.engine import lint_source
from detachlint.registry import load_rules

rules = [rule for rule in load_rules().values() if rule.default_enabled]
# Start-up aside: the first lint in a process pays one-time costs (lazy
# imports, compiled patterns) whatever the file's size, so another file goes first.
lint_source(open(sys.argv[2], "rb").read(), sys.argv[2], rules)
source = open(sys.argv[1], "rb").read()
start = time.perf_counter()
if sys.argv[3] == "parse":
    libcst.parse_module(source)
    findings = None
else:
    findings = len(lint_source(source, sys.argv[1], rules).findings)
print(json.dumps({
    "seconds": time.perf_counter() - start,
    "findings": findings,
    "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
"""


def _child(path: Path, what: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), str(WARM_UP), what], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def measure(path: Path, runs: int) -> dict:
    parses, lints = [], []
    for _ in range(runs):
        parses.append(_child(path, "parse"))
        lints.append(_child(path, "lint"))
    return {
        "parse": statistics.median(s["seconds"] for s in parses),
        "lint": statistics.median(s["seconds"] for s in lints),
        "findings": lints[0]["findings"],
        "peak_mb": max(s["peak_mb"] for s in lints),
        "parse_peak_mb": max(s["peak_mb"] for s in parses),
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-copies", type=int, default=128)
    parser.add_argument("--big-mb", type=float, default=5.0, help="0 skips the big file")
    args = parser.parse_args()
    unit = UNIT.read_text()
    print(f"| copies | lines | findings | parse s | lint s | ms per 1k lines | analysis / parse | peak MB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        copies = 4
        while copies <= args.max_copies:
            path = Path(folder) / f"copies_{copies}.py"
            path.write_text(unit * copies)
            lines = unit.count("\n") * copies
            m = measure(path, args.runs)
            per_k = 1000 * m["lint"] / lines * 1000
            ratio = (m["lint"] - m["parse"]) / m["parse"]
            print(
                f"| {copies} | {lines} | {m['findings']} | {m['parse']:.3f} | {m['lint']:.3f} "
                f"| {per_k:.1f} | {ratio:.2f} | {m['peak_mb']:.0f} |"
            )
            copies *= 2
        if args.big_mb:
            path = Path(folder) / "big.py"
            repeat = int(args.big_mb * 1024 * 1024 / len(unit.encode())) + 1
            path.write_text(unit * repeat)
            m = measure(path, 1)
            size = path.stat().st_size / 1024 / 1024
            print(
                f"\n{size:.1f} MB file ({unit.count(chr(10)) * repeat} lines): parse {m['parse']:.1f} s, "
                f"lint {m['lint']:.1f} s, {m['findings']} findings, peak {m['peak_mb']:.0f} MB "
                f"(the bare parse's peak: {m['parse_peak_mb']:.0f} MB)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
