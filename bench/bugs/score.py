"""Score detachlint on the real-bug benchmark:
`python bench/bugs/score.py [--verify] [--json] [--findings REPORT] [--batch NAME] [--renamed] [CASE_ROOT]`.

Every case is linted with the default rules; a rule that is off by default
counts on the cases of its own category (as for a user who turned it on)
and nowhere else. A bug is caught when a finding lands on one of its
`expect:` lines; every finding on any other line, or in a look-alike, is a
false finding. Prints per category and overall: cases, caught, missed,
false findings, recall and precision, then every miss and false finding.
With `--verify`, also what the verifier said of each finding.

`--findings REPORT` scores a saved report instead of linting now: the JSON
lines of `detachlint check CASE_ROOT --select ALL --format jsonl`, made by
another version (an older commit's false findings are what the verifier is
measured on while today's rules make none). With `--verify`, today's
verifier judges those findings.

`--batch NAME` scores only the cases of one blind batch (`batches/NAME.txt`,
see BATCHES.md). `--renamed` scores every case with the identifiers its
author chose renamed to neutral ones (`rename.py`), same lines and layout:
a finding that depends on a name is lost there.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent.parent))

from cases import HEADLINE, Case, batch_cases, coverage_gaps, judged_true, load_cases  # noqa: E402
from rename import rename_tree  # noqa: E402

from detachlint.api import CheckOptions, check  # noqa: E402
from detachlint.config import Selection  # noqa: E402
from detachlint.finding import Finding  # noqa: E402
from detachlint.registry import load_rules  # noqa: E402


@dataclass
class Outcome:
    case: Case
    findings: List[Finding] = field(default_factory=list)
    # Findings of other rules on unlisted lines, judged true by hand (judged.txt).
    judged: Dict[Tuple[int, str], str] = field(default_factory=dict)

    @property
    def true_findings(self) -> List[Finding]:
        return [f for f in self.findings if f.line in self.case.expected]

    @property
    def judged_findings(self) -> List[Finding]:
        return [f for f in self.findings if f.line not in self.case.expected and (f.line, f.code) in self.judged]

    @property
    def false_findings(self) -> List[Finding]:
        return [f for f in self.findings if f.line not in self.case.expected and (f.line, f.code) not in self.judged]

    @property
    def caught(self) -> bool:
        return self.case.is_bug and bool(self.true_findings)


def run(cases: List[Case], verify: bool = False, report_file: Optional[Path] = None) -> List[Outcome]:
    rules = load_rules()
    opt_in = {code for code, rule in rules.items() if not rule.default_enabled}
    if report_file is None:
        findings = lint(cases, rules, verify)
    else:
        findings = saved(report_file, verify)
    by_path: Dict[str, List[Finding]] = collections.defaultdict(list)
    for finding in findings:
        by_path[str(Path(finding.path).resolve())].append(finding)
    outcomes = []
    judged = judged_true(cases[0].path.parent.parent) if cases else {}
    for case in cases:
        found = [f for f in by_path[str(case.path.resolve())] if f.code not in opt_in or f.code == case.category]
        own = {(line, code): why for (name, line, code), why in judged.items() if name == case.name}
        outcomes.append(Outcome(case, sorted(found), own))
    return outcomes


def run_renamed(cases: List[Case], scratch: Path, root: Path, verify: bool = False) -> List[Outcome]:
    """The cases with their authors' identifiers renamed, scored on the same
    expected lines; outcomes name the original cases."""
    written = rename_tree(root, scratch, [case.path for case in cases])
    renamed = [replace(case, path=written[case.path]) for case in cases]
    outcomes = run(renamed, verify=verify)
    for outcome, case in zip(outcomes, cases):
        outcome.case = case
    return outcomes


def lint(cases: List[Case], rules: dict, verify: bool) -> List[Finding]:
    options = CheckOptions(selection=Selection(select=sorted(rules)), no_cache=True)
    if verify:
        from detachlint.verify import VerifyOptions

        options = CheckOptions(selection=options.selection, no_cache=True, verify=VerifyOptions(show_refuted=True))
    result = check([str(case.path) for case in cases], options)
    if result.errors:
        raise SystemExit("detachlint reported errors:\n" + "\n".join(result.errors))
    return result.findings


def saved(report_file: Path, verify: bool) -> List[Finding]:
    """The findings of a saved jsonl report, verified now when asked."""
    try:
        lines = report_file.read_text(encoding="utf-8").splitlines()
        records = [json.loads(line) for line in lines if line.strip()]
    except (OSError, ValueError) as error:
        raise SystemExit(f"cannot read {report_file}: {error}") from None
    findings = [Finding.from_json({**record, "verification": None}) for record in records if record["code"] != "DL000"]
    if not verify:
        return findings
    from detachlint.verify import Verifier, VerifyOptions

    verifier = Verifier(VerifyOptions(show_refuted=True))
    verifier.start()
    try:
        return verifier.verify(findings, lambda path: Path(path).read_text(encoding="utf-8"))
    finally:
        verifier.close()


def _ratio(part: int, whole: int) -> Optional[float]:
    return part / whole if whole else None


def _fmt(value: Optional[float]) -> str:
    return "–" if value is None else f"{value:.2f}"


def summarise(outcomes: List[Outcome]) -> dict:
    """Per category, per headline hazard and overall; plain data, for tables and tests."""
    categories = sorted({o.case.category for o in outcomes})
    rows = {}

    def row(selected: List[Outcome], rule_codes) -> dict:
        bugs = [o for o in selected if o.case.is_bug]
        caught = [o for o in bugs if o.caught]
        # A rule's precision is over every finding it made, on any case.
        made = [(o, f) for o in outcomes for f in o.findings if rule_codes is None or f.code in rule_codes]
        false = [(o, f) for o, f in made if f in o.false_findings]
        return {
            "bugs": len(bugs),
            "look_alikes": len(selected) - len(bugs),
            "caught": len(caught),
            "missed": len(bugs) - len(caught),
            "recall": _ratio(len(caught), len(bugs)),
            "findings": len(made),
            "false": len(false),
            "precision": _ratio(len(made) - len(false), len(made)),
        }

    for category in categories:
        rows[category] = row([o for o in outcomes if o.case.category == category], {category})
    headline = {
        f"{name} ({', '.join(codes)})": row([o for o in outcomes if o.case.category in codes], set(codes))
        for name, codes in HEADLINE.items()
    }
    return {"categories": rows, "headline": headline, "overall": row(outcomes, None)}


def verdicts(outcomes: List[Outcome]) -> dict:
    """What the verifier said: of the caught bugs, and of the false findings."""
    caught = [o for o in outcomes if o.caught]
    confirmed = [o for o in caught if any(_status(f) == "confirmed" for f in o.true_findings)]
    false = [f for o in outcomes for f in o.false_findings]
    refuted = [f for f in false if _status(f) == "refuted"]
    by_status = collections.Counter(_status(f) for o in outcomes for f in o.findings)
    return {
        "caught": len(caught),
        "caught_confirmed": len(confirmed),
        "confirmed_share": _ratio(len(confirmed), len(caught)),
        "false": len(false),
        "false_refuted": len(refuted),
        "refuted_share": _ratio(len(refuted), len(false)),
        "statuses": dict(sorted(by_status.items())),
        "false_confirmed": [
            f"{o.case.name}:{f.line} {f.code}" for o in outcomes for f in o.false_findings if _status(f) == "confirmed"
        ],
    }


def _status(finding: Finding) -> str:
    return finding.verification.status if finding.verification else "not probed"


def _table(title: str, rows: Dict[str, dict]) -> List[str]:
    lines = [
        f"| {title} | bugs | look-alikes | caught | missed | recall | findings | false | precision |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r['bugs']} | {r['look_alikes']} | {r['caught']} | {r['missed']} | {_fmt(r['recall'])} "
            f"| {r['findings']} | {r['false']} | {_fmt(r['precision'])} |"
        )
    return lines


def report(outcomes: List[Outcome], verify: bool) -> str:
    summary = summarise(outcomes)
    overall = summary["overall"]
    out = [
        f"detachlint on {len(outcomes)} real-bug benchmark cases: {overall['bugs']} bugs, {overall['look_alikes']} look-alikes",
        "",
    ]
    out += _table("category", {**summary["categories"], "**overall**": overall})
    out += [""]
    out += _table("headline hazard", summary["headline"])
    if verify:
        v = verdicts(outcomes)
        out += [
            "",
            f"--verify: {v['caught_confirmed']} of {v['caught']} caught bugs confirmed ({_fmt(v['confirmed_share'])}); "
            f"{v['false_refuted']} of {v['false']} false findings refuted ({_fmt(v['refuted_share'])})",
            "verdicts of every finding: " + ", ".join(f"{k} {n}" for k, n in v["statuses"].items()),
        ]
        if v["false_confirmed"]:
            out.append("false findings confirmed: " + ", ".join(v["false_confirmed"]))
    gaps = coverage_gaps([o.case for o in outcomes], catalogue=load_rules())
    if gaps:
        out += ["", "The benchmark is short of its targets here:"] + [f"  {gap}" for gap in gaps]
    misses = [o for o in outcomes if o.case.is_bug and not o.caught]
    out += ["", f"Misses ({len(misses)}):"]
    for o in misses:
        elsewhere = ", ".join(f"{f.code} on {f.line}" for f in o.findings)
        lines = ", ".join(str(n) for n in sorted(o.case.expected))
        out.append(f"  {o.case.name}: expected line {lines}" + (f"; found only {elsewhere}" if elsewhere else ""))
    judged = [(o, f) for o in outcomes for f in o.judged_findings]
    out += ["", f"Findings of other rules on unlisted lines, judged true by hand in judged.txt ({len(judged)}):"]
    for o, f in judged:
        out.append(f"  {o.case.name}:{f.line}: {f.code} {o.judged[(f.line, f.code)]}")
    false = [(o, f) for o in outcomes for f in o.false_findings]
    out += ["", f"False findings ({len(false)}):"]
    for o, f in false:
        said = f" [{_status(f)}]" if verify else ""
        out.append(f"  {o.case.name}:{f.line}: {f.code}{said} {f.message}")
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=HERE, help="the folder of case folders")
    parser.add_argument("--verify", action="store_true", help="also run the verifier on every finding")
    parser.add_argument("--json", action="store_true", help="the summary as JSON")
    parser.add_argument("--findings", type=Path, metavar="REPORT", help="score this saved jsonl report instead of linting")
    parser.add_argument("--batch", metavar="NAME", help="score only the cases of this blind batch (batches/NAME.txt)")
    parser.add_argument("--renamed", action="store_true", help="score the cases with their authors' identifiers renamed")
    args = parser.parse_args(argv)
    if args.renamed and args.findings:
        parser.error("--renamed lints the renamed cases; it cannot score a saved report")
    try:
        cases = batch_cases(args.batch, args.root) if args.batch else load_cases(args.root)
    except (OSError, ValueError) as error:
        parser.error(str(error))
    if args.renamed:
        with tempfile.TemporaryDirectory(prefix="detachlint-renamed-") as scratch:
            outcomes = run_renamed(cases, Path(scratch), args.root, verify=args.verify)
    else:
        outcomes = run(cases, verify=args.verify, report_file=args.findings)
    if args.json:
        data = {"summary": summarise(outcomes)}
        if args.verify:
            data["verify"] = verdicts(outcomes)
        data["misses"] = [o.case.name for o in outcomes if o.case.is_bug and not o.caught]
        data["judged_true"] = [f"{o.case.name}:{f.line}:{f.code}" for o in outcomes for f in o.judged_findings]
        data["false_findings"] = [f"{o.case.name}:{f.line}:{f.code}" for o in outcomes for f in o.false_findings]
        print(json.dumps(data, indent=2))
    else:
        print(report(outcomes, args.verify))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
