"""The real-bug benchmark (bench/bugs/): headers, counts, and every case's
evidence run with real torch; the scorer's matching on cases made here."""

from __future__ import annotations

import collections
import importlib
import json
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

from detachlint.registry import load_rules

BENCH = ROOT / "bench" / "bugs"


# The benchmark's modules import each other by plain name, as scripts do.
sys.path.insert(0, str(BENCH))
cases = importlib.import_module("cases")
score = importlib.import_module("score")
sys.path.remove(str(BENCH))
PATHS = cases.case_paths()
IDS = [f"{p.parent.name}/{p.stem}" for p in PATHS]


@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_header_and_size(path):
    case = cases.read_case(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    # Blind batches keep the real code's shape, so some run long; none is cut down after scoring.
    assert 20 <= len(lines) <= 250, f"{case.name} has {len(lines)} lines; a case is 20-250"
    assert case.source.startswith(("https://", "http://")), case.source  # some blogs serve no https
    assert re.search(r"""^if __name__ == ["']__main__["']:""", path.read_text(encoding="utf-8"), re.M), "a case runs its evidence as a script"


def test_every_case_has_its_own_source():
    seen = collections.defaultdict(list)
    for case in cases.load_cases():
        seen[case.source.rstrip("/")].append(case.name)
    shared = {url: names for url, names in seen.items() if len(names) > 1}
    assert not shared, f"cases sharing a source: {shared}"


def test_coverage_names_every_category_under_its_target(tmp_path):
    _case(tmp_path, "DL301", "bug_one.py", "flag 12, 13", EVAL_LOOP)
    _case(tmp_path, "DL201", "ok_one.py", "clean", EVAL_LOOP)
    gaps = cases.coverage_gaps(cases.load_cases(tmp_path), catalogue=["DL201", "DL301", "DL601"])
    assert "DL301: 1 bugs, 0 look-alikes (target 4 and 3)" in gaps
    assert "DL601: 0 bugs, 0 look-alikes (target 4 and 3)" in gaps
    assert "evaluation without no_grad: 1 bugs (target 20)" in gaps
    assert any(gap.startswith("cases: 2") for gap in gaps)


@pytest.fixture(scope="module")
def evidence():
    """Every case's evidence, run once in a subprocess that imports torch once."""
    pytest.importorskip("torch")
    done = subprocess.run(
        [sys.executable, str(BENCH / "evidence.py"), "--jsonl"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert results, done.stderr[-2000:]
    return {r["case"]: r for r in results}


@pytest.mark.evidence
@pytest.mark.parametrize("path", PATHS, ids=IDS)
def test_evidence_holds(path, evidence):
    result = evidence[f"{path.parent.name}/{path.name}"]
    assert result["holds"], f"exit {result['exit']}, timed out: {result['timed_out']}\n{result['output']}"


def _case(root, category, name, expect, body):
    folder = root / category
    folder.mkdir(exist_ok=True)
    header = f"# source: https://example.org/{name}\n# category: {category}\n# expect: {expect}\n# evidence: -\n"
    (folder / name).write_text(header + textwrap.dedent(body))


EVAL_LOOP = """\
    import torch
    from torch import nn


    def evaluate(model, batches):
        model.eval()
        outs = []
        for x in batches:
            outs.append(model(x))
        return outs
    """


def test_scorer_counts_catches_misses_and_false_findings(tmp_path):
    _case(tmp_path, "DL301", "bug_caught.py", "flag 12, 13", EVAL_LOOP)
    _case(tmp_path, "DL301", "bug_missed.py", "flag 10", EVAL_LOOP.replace("outs = []", "outs = list()"))
    _case(tmp_path, "DL301", "ok_flagged.py", "clean", EVAL_LOOP)
    loaded = cases.load_cases(tmp_path)
    outcomes = score.run(loaded)
    by_name = {o.case.path.name: o for o in outcomes}
    assert by_name["bug_caught.py"].caught
    # The loop is flagged in the missed case too, but not on the line it expects.
    assert not by_name["bug_missed.py"].caught and by_name["bug_missed.py"].false_findings
    assert by_name["ok_flagged.py"].false_findings
    summary = score.summarise(outcomes)
    row = summary["categories"]["DL301"]
    assert (row["bugs"], row["look_alikes"], row["caught"], row["missed"]) == (2, 1, 1, 1)
    assert row["recall"] == 0.5
    assert row["false"] == row["findings"] - 1
    text = score.report(outcomes, verify=False)
    assert "DL301/bug_missed.py: expected line 10" in text
    assert "DL301/ok_flagged.py:13: DL301" in text


def test_scorer_scores_a_saved_report(tmp_path):
    """`--findings REPORT`: another version's jsonl report, scored against the
    cases as it stands (its parse errors left out), not today's findings."""
    _case(tmp_path, "DL301", "bug_caught.py", "flag 12, 13", EVAL_LOOP)
    _case(tmp_path, "DL301", "ok_clean.py", "clean", EVAL_LOOP.replace("outs.append(model(x))", "outs.append(x)"))
    loaded = cases.load_cases(tmp_path)
    bug, ok = (str(c.path) for c in loaded)

    def record(path, line, code="DL301"):
        return {"code": code, "name": "n", "path": path, "line": line, "column": 1, "end_line": line,
                "end_column": 2, "message": "m", "severity": "error", "fix": None, "verification": {"status": "confirmed", "evidence": "old"}}

    report = tmp_path / "old.jsonl"
    rows = [record(bug, 13), record(ok, 12), record(ok, 1, "DL000")]
    report.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    by_name = {o.case.path.name: o for o in score.run(loaded, report_file=report)}
    assert by_name["bug_caught.py"].caught
    assert [f.line for f in by_name["ok_clean.py"].false_findings] == [12]
    # The saved verdicts are dropped: only a verifier run now may judge them.
    assert all(f.verification is None for o in by_name.values() for f in o.findings)
    assert score.run(loaded) and not score.run(loaded)[1].findings  # today's rules leave the clean case alone
    report.write_text("{not json\n")
    with pytest.raises(SystemExit, match="cannot read"):
        score.run(loaded, report_file=report)


def test_scorer_counts_opt_in_rules_only_in_their_category(tmp_path):
    body = """\
    import torch

    buf = torch.zeros(3)
    buf.data.resize_(5).copy_(torch.ones(5))
    print(buf.sum())
    """
    _case(tmp_path, "DL102", "bug_rebind.py", "flag 8", body)
    _case(tmp_path, "DL301", "ok_rebind.py", "clean", body)
    outcomes = {o.case.path.name: o for o in score.run(cases.load_cases(tmp_path))}
    assert [f.code for f in outcomes["bug_rebind.py"].findings] == ["DL102"]
    assert outcomes["ok_rebind.py"].findings == []


@pytest.mark.parametrize(
    "header, complaint",
    [
        ("# source: x\n# category: DL301\n# expect: flag 2\n# evidence: -\n", "is not a line of code"),
        ("# source: x\n# category: DL999x\n# expect: clean\n# evidence: -\n", "neither a rule code"),
        ("# category: DL301\n# source: x\n# expect: clean\n# evidence: -\n", "should be '# source: ...'"),
        ("# source: x\n# category: DL301\n# expect: clean\n# evidence: -\n", "is named ok_<slug>.py"),
    ],
)
def test_bad_headers_are_named(tmp_path, header, complaint):
    folder = tmp_path / "DL301"
    folder.mkdir()
    path = folder / "bug_x.py"
    path.write_text(header + "import torch\n")
    with pytest.raises(cases.HeaderError, match=complaint.replace("(", r"\(").replace("'", ".")):
        cases.read_case(path)


def test_judged_findings_are_other_rules_findings_that_still_occur():
    """Every entry of judged.txt names a case, a line outside its expected
    ones and another rule's code, and the scorer still meets that finding:
    a stale judgment cannot hide a false finding."""
    judged = cases.judged_true()
    by_name = {c.name: c for c in cases.load_cases()}
    for (name, line, code), why in judged.items():
        case = by_name[name]
        assert line not in case.expected and code != case.category and why
    wanted = sorted({name for name, _, _ in judged})
    outcomes = score.run([by_name[name] for name in wanted])
    met = {(o.case.name, f.line, f.code) for o in outcomes for f in o.judged_findings}
    assert met == set(judged)


def test_scorer_counts_judged_findings_as_true(tmp_path):
    _case(tmp_path, "DL301", "ok_flagged.py", "clean", EVAL_LOOP)
    (tmp_path / "judged.txt").write_text("# a comment\nDL301/ok_flagged.py:13 DL301  judged true for the test\n")
    (outcome,) = score.run(cases.load_cases(tmp_path))
    assert [f.line for f in outcome.judged_findings] == [13] and outcome.false_findings == []
    (tmp_path / "judged.txt").write_text("DL301/ok_flagged.py line 13\n")
    with pytest.raises(cases.HeaderError):
        cases.judged_true(tmp_path)
