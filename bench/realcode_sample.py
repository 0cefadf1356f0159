"""A blind sample of detachlint's findings on real code, for judging by hand:
`python bench/realcode_sample.py ROOT ... --sheet SHEET.md [--seed N] [--size N] [--per-rule N] [--per-repo N]`
then, once every finding is judged, `python bench/realcode_sample.py --score SHEET.md`.

Each ROOT is one repository's tree (its folder name names it, `owner+name`).
detachlint runs over every root with its default rules, as a new user's
first run would; a seeded random sample of the findings is drawn (at least
`--per-rule` of every rule and `--per-repo` of every repository that has any,
the rest at random from all) and
written as a judging sheet: each finding with its message and the code
around it, and three fields to fill in:

    verdict: true | harmless | false
    act: yes | no        (would a PyTorch expert change the code for it?)
    why: one line

`true` is a finding whose message is right and whose hazard changes what
the program computes, raises, or wastes; `harmless` is right about the code
but without effect; `false` is wrong. `--score` prints precision
(true / all), the share worth acting on, and both per rule and per repository.
Repositories listed in `bench/training_repos.txt` (tuned on before) are refused.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re
import sys
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from detachlint.api import CheckOptions, check  # noqa: E402
from detachlint.finding import Finding  # noqa: E402

CONTEXT = 8  # lines of code either side of a finding
VERDICTS = ("true", "harmless", "false")
FIELD = re.compile(r"^(verdict|act|why):[ \t]*(.*)$")


def tuned_on() -> set:
    listing = HERE / "training_repos.txt"
    names = set()
    for line in listing.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            names.add(line.split()[0].lower())
    return names


def repo_name(root: Path) -> str:
    return root.resolve().name.replace("+", "/")


def findings_of(roots: List[Path]) -> List[Finding]:
    result = check([str(root) for root in roots], CheckOptions(no_cache=True))
    for error in result.errors:
        print(f"detachlint: {error}", file=sys.stderr)
    return [f for f in result.findings if f.code != "DL000"]


def draw(findings: List[Finding], roots: List[Path], size: int, per_rule: int, per_repo: int, seed: int) -> List[Finding]:
    """At least `per_rule` of every rule and `per_repo` of every repository
    (all of them where fewer were made), then the rest at random; in a stable order."""
    rng = random.Random(seed)
    pool = sorted(findings)
    strata: Dict[tuple, List[Finding]] = collections.defaultdict(list)
    for finding in pool:
        strata[("rule", finding.code)].append(finding)
        strata[("repo", _root_of(finding, roots))].append(finding)
    chosen: List[Finding] = []
    for (kind, key), members in sorted(strata.items(), key=lambda kv: (kv[0][0] != "rule", str(kv[0][1]))):
        want = per_rule if kind == "rule" else per_repo
        have = [f for f in members if f in chosen]
        left = [f for f in members if f not in chosen]
        chosen += rng.sample(left, max(0, min(want - len(have), len(left))))
    rest = [f for f in pool if f not in chosen]
    chosen += rng.sample(rest, max(0, min(size - len(chosen), len(rest))))
    return sorted(chosen, key=lambda f: (f.path, f.line, f.code))


def _root_of(finding: Finding, roots: List[Path]) -> str:
    resolved = str(Path(finding.path).resolve())
    return next((str(r.resolve()) for r in roots if resolved.startswith(str(r.resolve()) + "/")), "?")


def context(path: str, line: int, cell: Optional[int] = None) -> str:
    """The code around `line`; for a notebook, of the finding's cell (its
    lines counted within the cell, as the finding counts them)."""
    try:
        if cell is not None:
            notebook = json.loads(Path(path).read_text(encoding="utf-8", errors="replace"))
            source = notebook["cells"][cell - 1].get("source", "")
            lines = ("".join(source) if isinstance(source, list) else source).splitlines()
        else:
            lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except (OSError, ValueError, KeyError, IndexError) as error:
        return f"(cannot read: {error})"
    first, last = max(1, line - CONTEXT), min(len(lines), line + CONTEXT)
    return "\n".join(f"{'>' if n == line else ' '}{n:5d}  {lines[n - 1]}" for n in range(first, last + 1))


def write_sheet(sample: List[Finding], roots: List[Path], total: int, seed: int, sheet: Path) -> None:
    by_root = {str(root.resolve()): repo_name(root) for root in roots}
    counts = collections.Counter(f.code for f in sample)
    out = [
        "# Judging sheet: detachlint's findings on real code",
        "",
        f"{len(sample)} findings drawn with seed {seed} from {total} made by the default rules over "
        f"{len(roots)} repositories ({', '.join(sorted(by_root.values()))}).",
        "Per rule: " + ", ".join(f"{code} {n}" for code, n in sorted(counts.items())) + ".",
        "",
        "Fill in each finding's `verdict:` (true / harmless / false), `act:` (yes / no) and `why:`,",
        "then run `python bench/realcode_sample.py --score` on this file.",
    ]
    for number, finding in enumerate(sample, start=1):
        root = _root_of(finding, roots)
        repo = by_root.get(root, "?")
        shown = str(Path(finding.path).resolve())[len(root) + 1:] if root in by_root else finding.path
        out += [
            "",
            f"## {number}. {finding.code} {repo} {shown}:{f'cell {finding.cell}:' if finding.cell else ''}{finding.line}",
            "",
            f"> {finding.message}",
            "",
            "```python",
            context(finding.path, finding.line, finding.cell),
            "```",
            "",
            "verdict: ",
            "act: ",
            "why: ",
        ]
    sheet.write_text("\n".join(out) + "\n", encoding="utf-8")


def read_sheet(sheet: Path) -> List[dict]:
    entries, current = [], None
    for line in sheet.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^## (\d+)\. (DL\d{3}) (\S+) (.+):(\d+)$", line)
        if heading:
            current = {"code": heading.group(2), "repo": heading.group(3), "where": f"{heading.group(4)}:{heading.group(5)}"}
            entries.append(current)
            continue
        field = FIELD.match(line)
        if field and current is not None:
            current[field.group(1)] = field.group(2).strip()
    return entries


def score(sheet: Path) -> int:
    entries = read_sheet(sheet)
    unjudged = [e for e in entries if e.get("verdict") not in VERDICTS or e.get("act") not in ("yes", "no")]
    if not entries or unjudged:
        where = ", ".join(f"{e['code']} {e['where']}" for e in unjudged[:5])
        print(f"{sheet}: {len(unjudged)} of {len(entries)} findings not judged yet ({where})", file=sys.stderr)
        return 2

    def row(group: List[dict]) -> str:
        true = sum(e["verdict"] == "true" for e in group)
        harmless = sum(e["verdict"] == "harmless" for e in group)
        act = sum(e["act"] == "yes" for e in group)
        return f"| {len(group)} | {true} | {harmless} | {len(group) - true - harmless} | {true / len(group):.2f} | {act / len(group):.2f} |"

    head = ["| findings | true | harmless | false | precision | worth acting on |", "|---:|---:|---:|---:|---:|---:|"]
    print(f"{len(entries)} findings from {len({e['repo'] for e in entries})} repositories")
    print("\n".join(head + [row(entries)]))
    for key in ("code", "repo"):
        print(f"\n| {key} |" + head[0][1:])
        print("|---" + head[1])
        groups = collections.defaultdict(list)
        for e in entries:
            groups[e[key]].append(e)
        for name in sorted(groups):
            print(f"| {name} " + row(groups[name]))
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="*", type=Path, help="one folder per repository, named owner+name")
    parser.add_argument("--sheet", type=Path, help="where to write the judging sheet")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--size", type=int, default=60, help="findings to draw in all")
    parser.add_argument("--per-rule", type=int, default=2, help="at least this many of every rule that made any")
    parser.add_argument("--per-repo", type=int, default=1, help="at least this many of every repository that has any")
    parser.add_argument("--score", type=Path, metavar="SHEET", help="score a judged sheet instead")
    args = parser.parse_args(argv)
    if args.score:
        return score(args.score)
    if not args.roots or not args.sheet:
        parser.error("give the repositories' folders and --sheet (or --score SHEET)")
    missing = [str(r) for r in args.roots if not r.is_dir()]
    if missing:
        parser.error(f"not a folder: {', '.join(missing)}")
    known = tuned_on()
    seen = [repo_name(r) for r in args.roots if repo_name(r).lower() in known]
    if seen:
        parser.error(f"tuned on before (bench/training_repos.txt): {', '.join(seen)}")
    findings = findings_of(args.roots)
    sample = draw(findings, args.roots, args.size, args.per_rule, args.per_repo, args.seed)
    write_sheet(sample, args.roots, len(findings), args.seed, args.sheet)
    counts = collections.Counter(f.code for f in findings)
    print(f"{len(findings)} findings ({', '.join(f'{c} {n}' for c, n in sorted(counts.items()))}); "
          f"{len(sample)} drawn into {args.sheet}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
