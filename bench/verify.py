"""Verify every finding on real code and report what it cost:
`python bench/verify.py PATH ... [--timeout 5] [--dump FILE]`.
`--sandbox-cost ROUNDS` instead runs the same findings alternately in the
bubblewrap sandbox and in the worker confined without namespaces, and
prints each one's start-up and per-reproduction medians side by side.

Prints the worker's start-up time, the median and total time per
reproduction once warm, the verdict counts per rule, and a few evidence
texts. Not part of the test suite (it runs torch over whole packages).
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from detachlint.api import CheckOptions, check  # noqa: E402
from detachlint.verify import PROBED, VerifyOptions  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--examples", type=int, default=3, help="evidence texts to print per verdict")
    parser.add_argument("--dump", type=Path, help="also write every probed finding and its verdict here, one JSON object per line")
    parser.add_argument("--sandbox-cost", type=int, metavar="ROUNDS", help="compare the sandbox with the worker without namespaces")
    args = parser.parse_args()
    if args.sandbox_cost:
        return _sandbox_cost(args.paths, args.timeout, args.sandbox_cost)
    started = time.perf_counter()
    run = check(args.paths, CheckOptions(no_cache=True, verify=VerifyOptions(timeout=args.timeout, show_refuted=True)))
    wall = time.perf_counter() - started
    stats = run.verify_stats
    probed = [f for f in run.findings if f.code in PROBED and f.verification is not None]
    print(f"findings: {len(run.findings)}, probed: {len(probed)}, wall {wall:.1f} s")
    if stats is not None and stats.seconds:
        print(f"worker start-up: {stats.startup_seconds:.2f} s; per reproduction: median {statistics.median(stats.seconds) * 1000:.0f} ms, "
              f"mean {statistics.mean(stats.seconds) * 1000:.0f} ms over {len(stats.seconds)}; worker restarts: {stats.restarts}")
    counts = collections.defaultdict(collections.Counter)
    for finding in probed:
        counts[finding.code][finding.verification.status] += 1
        counts[finding.code][finding.verification.basis or "none"] += 1
    # Decided on the user's own code: confirmed or refuted (both need basis user-code).
    print("\n| rule | confirmed | refuted | plausible | inconclusive | user-code | stand-in |\n|---|---|---|---|---|---|---|")
    for code in sorted(counts):
        c = counts[code]
        print(f"| {code} | {c['confirmed']} | {c['refuted']} | {c['plausible']} | {c['inconclusive']} | {c['user-code']} | {c['stand-in']} |")
    decided = sum(c["confirmed"] + c["refuted"] for c in counts.values())
    print(f"\ndecided on the user's own code: {decided} of {len(probed)} probed findings")
    if args.dump is not None:
        with args.dump.open("w") as out:
            for finding in probed:
                row = {"path": finding.path, "line": finding.line, "code": finding.code, "message": finding.message}
                out.write(json.dumps({**row, **finding.verification.to_json()}) + "\n")
    shown = collections.Counter()
    print()
    for finding in probed:
        status = finding.verification.status
        if shown[status] < args.examples:
            shown[status] += 1
            print(f"{finding.path}:{finding.line} {finding.code} {status}: {finding.verification.evidence}")
    return 0


def _sandbox_cost(paths, timeout: float, rounds: int) -> int:
    from detachlint.verify import sandbox

    bwrap = sandbox.namespaces_available()
    if bwrap is None:
        print("bubblewrap cannot make namespaces here: nothing to compare")
        return 2
    kinds = {"sandbox": lambda: bwrap, "no namespaces": lambda: None}
    startup, per = collections.defaultdict(list), collections.defaultdict(list)
    for _ in range(rounds):
        for kind, available in kinds.items():
            sandbox.namespaces_available = available
            run = check(paths, CheckOptions(no_cache=True, verify=VerifyOptions(timeout=timeout, show_refuted=True)))
            startup[kind].append(run.verify_stats.startup_seconds)
            per[kind] += run.verify_stats.seconds
    for kind in kinds:
        print(f"{kind}: start-up median {statistics.median(startup[kind]):.2f} s over {rounds}; per reproduction median "
              f"{statistics.median(per[kind]) * 1000:.0f} ms over {len(per[kind])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
