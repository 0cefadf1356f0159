"""Score the placement and spelling matrix: `python bench/placement.py [--json] [--renamed]`.

`bench/placement/<CODE>/` holds, for every hazard of the catalogue, one
canonical bug written in four placements (`bug_module.py`: module-level
script; `bug_function.py`: a function with untyped parameters;
`bug_method.py`: a class working on `self.` attributes; `bug_helper.py`:
split between a helper and its caller) and the same hazard in equivalent
spellings (`bug_spelling_<how>.py`), each with its correct twin (`ok_*.py`).
The files have the benchmark's header (`# expect: flag N` or `clean`) and
run their own evidence (`python bench/bugs/evidence.py --root bench/placement`).

Prints recall and precision per hazard, per placement and per spelling,
then every miss and false finding. A miss stays in the table: the matrix
is never edited to pass.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

HERE = Path(__file__).resolve().parent
MATRIX = HERE / "placement"
sys.path.insert(0, str(HERE / "bugs"))
sys.path.insert(0, str(HERE.parent))

from cases import load_cases  # noqa: E402
from score import Outcome, run, run_renamed  # noqa: E402

PLACEMENTS = ("module", "function", "method", "helper")


def shape(outcome: Outcome) -> str:
    """`module`, `function`, `method`, `helper`, or `spelling:<how>`."""
    stem = outcome.case.path.stem.split("_", 1)[1]
    return "spelling:" + stem[len("spelling_"):] if stem.startswith("spelling_") else stem


def _row(outcomes: List[Outcome]) -> dict:
    bugs = [o for o in outcomes if o.case.is_bug]
    caught = sum(o.caught for o in bugs)
    findings = sum(len(o.findings) for o in outcomes)
    false = sum(len(o.false_findings) for o in outcomes)
    return {
        "bugs": len(bugs),
        "caught": caught,
        "recall": caught / len(bugs) if bugs else None,
        "look_alikes": len(outcomes) - len(bugs),
        "flagged_look_alikes": sum(bool(o.findings) for o in outcomes if not o.case.is_bug),
        "findings": findings,
        "false": false,
        "precision": (findings - false) / findings if findings else None,
    }


def summarise(outcomes: List[Outcome]) -> dict:
    groups: Dict[str, Dict[str, List[Outcome]]] = {"hazard": {}, "placement": {}, "spelling": {}}
    for outcome in outcomes:
        groups["hazard"].setdefault(outcome.case.category, []).append(outcome)
        kind = shape(outcome)
        if kind.startswith("spelling:"):
            groups["spelling"].setdefault(f"{outcome.case.category} {kind[9:]}", []).append(outcome)
        else:
            groups["placement"].setdefault(kind, []).append(outcome)
    order = {p: i for i, p in enumerate(PLACEMENTS)}
    groups["placement"] = dict(sorted(groups["placement"].items(), key=lambda kv: order.get(kv[0], len(order))))
    summary = {name: {key: _row(members) for key, members in group.items()} for name, group in groups.items()}
    summary["hazard"] = dict(sorted(summary["hazard"].items()))
    summary["spelling"] = dict(sorted(summary["spelling"].items()))
    # Per hazard and placement: which of the four caught it.
    grid = collections.defaultdict(dict)
    for outcome in outcomes:
        kind = shape(outcome)
        if outcome.case.is_bug and not kind.startswith("spelling:"):
            grid[outcome.case.category][kind] = outcome.caught
    summary["grid"] = dict(sorted(grid.items()))
    summary["overall"] = _row(outcomes)
    return summary


def _fmt(value) -> str:
    return "–" if value is None else f"{value:.2f}"


def _table(title: str, rows: Dict[str, dict]) -> List[str]:
    lines = [f"| {title} | bugs | caught | recall | look-alikes flagged | findings | false | precision |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['bugs']} | {r['caught']} | {_fmt(r['recall'])} | "
                     f"{r['flagged_look_alikes']} of {r['look_alikes']} | {r['findings']} | {r['false']} | {_fmt(r['precision'])} |")
    return lines


def report(outcomes: List[Outcome]) -> str:
    s = summarise(outcomes)
    o = s["overall"]
    out = [f"detachlint on the placement matrix: {len(outcomes)} files, {o['bugs']} bugs, {o['look_alikes']} look-alikes", ""]
    out += _table("placement", {**s["placement"], "**overall**": o}) + [""]
    grid = ["| hazard | " + " | ".join(PLACEMENTS) + " |", "|---|" + "---|" * len(PLACEMENTS)]
    for code, caught in s["grid"].items():
        grid.append(f"| {code} | " + " | ".join({True: "caught", False: "missed", None: "–"}[caught.get(p)] for p in PLACEMENTS) + " |")
    out += grid + [""]
    out += _table("hazard", s["hazard"]) + [""]
    out += _table("spelling", s["spelling"]) + [""]
    misses = [x for x in outcomes if x.case.is_bug and not x.caught]
    out.append(f"Misses ({len(misses)}):")
    out += [f"  {x.case.name}: expected line {', '.join(map(str, sorted(x.case.expected)))}"
            + (f"; found only {', '.join(f'{f.code} on {f.line}' for f in x.findings)}" if x.findings else "") for x in misses]
    false = [(x, f) for x in outcomes for f in x.false_findings]
    out += ["", f"False findings ({len(false)}):"]
    out += [f"  {x.case.name}:{f.line}: {f.code} {f.message}" for x, f in false]
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=MATRIX, help="the matrix's folder of hazard folders")
    parser.add_argument("--json", action="store_true", help="the summary as JSON")
    parser.add_argument("--renamed", action="store_true", help="with the files' identifiers renamed (bench/bugs/rename.py)")
    args = parser.parse_args(argv)
    cases = load_cases(args.root)
    if args.renamed:
        with tempfile.TemporaryDirectory(prefix="detachlint-renamed-") as scratch:
            outcomes = run_renamed(cases, Path(scratch), args.root)
    else:
        outcomes = run(cases)
    if args.json:
        data = summarise(outcomes)
        data["misses"] = [x.case.name for x in outcomes if x.case.is_bug and not x.caught]
        data["false_findings"] = [f"{x.case.name}:{f.line}:{f.code}" for x in outcomes for f in x.false_findings]
        print(json.dumps(data, indent=2))
    else:
        print(report(outcomes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
