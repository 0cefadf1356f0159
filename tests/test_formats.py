"""Every output format over one shared set of findings, against reviewed
snapshots; SARIF also against the official SARIF 2.1.0 JSON schema."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from xml.etree import ElementTree

import jsonschema
import pytest

from conftest import ROOT, run_cli
from detachlint.api import CheckOptions, check
from detachlint.finding import Verification
from detachlint.report import FORMATS, ReportContext

SNAPSHOTS = Path(__file__).parent / "snapshots" / "formats"
SARIF_SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """The example project's findings (a safe fix, an unsafe fix, none), one
    with a verifier verdict, one file with no findings and one that does not parse."""
    os.chdir(ROOT / "examples")
    try:
        run = check(["models.py", "train.py"], CheckOptions(no_cache=True))
    finally:
        os.chdir(ROOT)
    findings = list(run.findings)
    findings[0] = dataclasses.replace(
        findings[0],
        verification=Verification("confirmed", "`encoder.0.weight`: requires_grad=True, grad None after backward"),
    )
    broken = check(["-"], CheckOptions(no_cache=True, stdin=b"import torch\ndef f(:\n", stdin_filename="broken.py"))
    findings += broken.findings
    # Only the rules these findings come from: new rules leave the snapshots alone.
    rules = {code: run.rules[code] for code in ("DL101", "DL201", "DL301")}
    context = ReportContext(rules=rules, files=run.paths + ["broken.py", "clean.py"], errors=())
    return sorted(findings), context


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_format_snapshot(fmt, shared, update_snapshots):
    findings, context = shared
    # Paths are relative to the working directory, which SARIF names as its
    # source root: the snapshot holds a placeholder, whatever the checkout's path.
    output = FORMATS[fmt](findings, context).replace(Path.cwd().as_uri(), "file:///project")
    snapshot = SNAPSHOTS / f"{fmt}.txt"
    if update_snapshots or not snapshot.exists():
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        snapshot.write_text(output)
    assert output == snapshot.read_text()


def test_sarif_is_valid_sarif_2_1_0(shared):
    findings, context = shared
    document = json.loads(FORMATS["sarif"](findings, context))
    jsonschema.Draft7Validator(SARIF_SCHEMA).validate(document)
    run = document["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    results = run["results"]
    assert [r["ruleId"] for r in results] == [f.code for f in findings]
    for result in results:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    assert any("fixes" in r for r in results)
    assert any(r["properties"].get("verification", {}).get("status") == "confirmed" for r in results)
    assert all(rule.get("helpUri", "").endswith(rule["id"].lower() + "-" + rule["name"]) for rule in rules[1:])


def test_sarif_from_the_command_line_validates(tmp_path):
    (tmp_path / "train.py").write_text((ROOT / "examples" / "train.py").read_text())
    (tmp_path / "bad.py").write_text("import torch\nx = (\n")
    result = run_cli("check", ".", "--format", "sarif", "--output-file", "report.sarif", cwd=tmp_path)
    assert result.returncode == 1
    document = json.loads((tmp_path / "report.sarif").read_text())
    jsonschema.Draft7Validator(SARIF_SCHEMA).validate(document)
    codes = sorted(r["ruleId"] for r in document["runs"][0]["results"])
    assert codes == ["DL000", "DL101", "DL301"]


def test_junit_has_one_testcase_per_file(shared):
    findings, context = shared
    root = ElementTree.fromstring(FORMATS["junit"](findings, context))
    cases = {case.get("name"): case for case in root.iter("testcase")}
    assert sorted(cases) == ["broken.py", "clean.py", "models.py", "train.py"]
    assert cases["clean.py"].find("failure") is None
    assert cases["train.py"].find("failure").get("message") == "2 findings"


def test_github_annotations_escape_their_data():
    from detachlint.finding import Finding

    finding = Finding("a,b:c.py", 3, 4, "DL101", name="data-inplace", end_line=3, end_column=9,
                      message="50% wrong\nsecond line")
    line = FORMATS["github"]([finding], ReportContext())
    assert line == "::error file=a%2Cb%3Ac.py,line=3,endLine=3,col=4,endColumn=9,title=DL101 data-inplace::DL101 50%25 wrong%0Asecond line\n"


def test_jsonl_is_one_object_per_line(shared):
    findings, context = shared
    lines = FORMATS["jsonl"](findings, context).splitlines()
    assert [json.loads(line) for line in lines] == json.loads(FORMATS["json"](findings, context))


def test_statistics_counts_per_rule(tmp_path):
    (tmp_path / "train.py").write_text((ROOT / "examples" / "train.py").read_text())
    result = run_cli("check", ".", "--statistics", "-q", "--no-cache", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout.decode().splitlines() == [
        "1  DL101      data-inplace",
        "1  DL301  [*] eval-loop-without-no-grad",
    ]
    result = run_cli("check", ".", "--statistics", "--format", "json", "--no-cache", cwd=tmp_path)
    assert json.loads(result.stdout) == [
        {"code": "DL101", "name": "data-inplace", "count": 1, "fixable": False},
        {"code": "DL301", "name": "eval-loop-without-no-grad", "count": 1, "fixable": True},
    ]
