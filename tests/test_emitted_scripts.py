"""`--emit-repro` scripts, run with plain `python -I`, print the report's verdict.

One `check --verify --emit-repro` run over fixtures of several rules, then
each chosen finding's script in isolated mode (no PYTHONPATH, no user site,
a temporary working folder), two at a time: its last line must be the
verdict the report's JSON gives the same finding, status, basis and
evidence. The scripts import nothing from detachlint: only the standard
library, torch and the runtime module the run writes beside them.
"""

from __future__ import annotations

import ast
import concurrent.futures
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from detachlint.verify.repro import RUNTIME_MODULE, bound_names, file_name

from conftest import ROOT, run_cli
from test_verify import LOOKALIKES, _write

pytest.importorskip("torch")  # the verifier's extra; CI installs it with [dev]

# (fixture, line, rule): rules with a probe of their own and shared ones, and
# verdicts of every kind a script can print: confirmed on the user's code,
# plausible on a stand-in, inconclusive with its reason, and
# refuted (a look-alike of test_verify's, written to a temporary folder).
CASES = [
    ("fixtures/DL101/pos_bce_prob_clamp.py", 30, "DL101"),
    ("fixtures/DL201/pos_cut_in_called_function.py", 23, "DL201"),
    ("fixtures/DL202/pos_logged_prediction.py", 42, "DL202"),
    ("fixtures/DL203/pos_rebuilt_losses.py", 19, "DL203"),
    ("fixtures/DL204/pos_preview_before_loss.py", 20, "DL204"),
    ("fixtures/DL301/pos_script_module_level.py", 23, "DL301"),
    ("fixtures/DL302/pos_enable_grad_under_inference_mode.py", 36, "DL302"),
    ("fixtures/DL303/pos_forward_left_in_no_grad.py", 16, "DL303"),
    ("fixtures/DL401/pos_state_across_calls.py", 29, "DL401"),
    ("fixtures/DL402/pos_predict_and_plot.py", 16, "DL402"),
    ("fixtures/DL501/pos_logistic_regression_on_gpu.py", 26, "DL501"),
    ("fixtures/DL504/pos_attack_loops.py", 23, "DL504"),
    ("lookalike_dl201.py", None, "DL201"),
]


def _verdict_line(verification: dict) -> str:
    basis = f" ({verification['basis']})" if verification.get("basis") else ""
    return f"{verification['status']}{basis}: {verification['evidence']}"


def _replay(script: Path) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as cwd:
        return subprocess.run([sys.executable, "-I", str(script)], cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def replays(tmp_path_factory):
    """case -> (the report's finding, its script, the script's run)."""
    out = tmp_path_factory.mktemp("repro")
    lookalike = _write(tmp_path_factory.mktemp("lookalike"), "lookalike_dl201.py", LOOKALIKES["DL201"])
    files = sorted({path for path, _, _ in CASES if path.startswith("fixtures/")}) + [str(lookalike)]
    codes = ",".join(sorted({code for _, _, code in CASES}))
    result = run_cli(
        "check", "--jobs", "1", "--no-cache", "--verify", "--show-refuted", "--format", "json",
        "--select", codes, "--emit-repro", str(out), *files, cwd=ROOT,
    )
    assert result.returncode in (0, 1), result.stderr
    findings = {}
    for finding in json.loads(result.stdout):
        findings[(finding["path"], finding["line"], finding["code"])] = finding
        if finding["path"] == str(lookalike):
            findings[(lookalike.name, None, finding["code"])] = finding
    chosen = {case: findings.get(case) for case in CASES}
    scripts = {
        case: out / file_name({"path": f["path"], "line": f["line"], "code": f["code"]}, [])
        for case, f in chosen.items()
        if f is not None
    }
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        runs = dict(zip(scripts, pool.map(_replay, scripts.values())))
    return {case: (chosen[case], scripts.get(case), runs.get(case)) for case in CASES}


@pytest.mark.parametrize("case", CASES, ids=[f"{code}:{Path(path).stem}:{line}" for path, line, code in CASES])
def test_the_script_prints_the_reports_verdict(replays, case):
    finding, script, replay = replays[case]
    assert finding is not None and finding["verification"] is not None, f"no verified finding at {case}"
    lines = replay.stdout.strip().splitlines()
    assert lines, replay.stderr[-2000:]
    assert lines[-1] == _verdict_line(finding["verification"])
    status = finding["verification"]["status"]
    assert replay.returncode == {"confirmed": 1, "refuted": 0}.get(status, 2)


def test_the_scripts_need_detachlint_only_for_the_sandbox_and_say_so(replays):
    """A script runs with torch alone; detachlint, where installed, only
    gives it the sandbox (an import that may fail), and the header says
    when it runs unconfined."""
    for finding, script, _ in replays.values():
        if script is None:
            continue
        text = script.read_text()
        tree = ast.parse(text)
        docstring = ast.get_docstring(tree)
        assert "sandbox" in docstring and "UNCONFINED" in docstring and "DETACHLINT_UNCONFINED=1" in docstring
        guarded = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Try) and any(
                isinstance(handler.type, ast.Name) and handler.type.id == "ImportError" for handler in node.handlers
            ):
                guarded.update(id(inner) for inner in node.body)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(name.startswith("detachlint") for name in names):
                    assert id(node) in guarded and names == ["detachlint.verify.sandbox"], f"{script.name} imports {names}"


def test_a_script_is_its_spec_probe_and_main_and_the_runtime_is_written_once(replays):
    scripts = [script for _, script, _ in replays.values() if script is not None]
    folder = scripts[0].parent
    others = [p.name for p in folder.glob("*.py*") if not re.search(r"_L\d+_DL\d{3}(_\d+)?\.py$", p.name)]
    assert others == [f"{RUNTIME_MODULE}.py"]  # and no partial write left behind
    runtime_lines = (folder / f"{RUNTIME_MODULE}.py").read_text().count("\n")
    for script in scripts:
        tree = ast.parse(script.read_text())
        spec = next(node for node in tree.body if isinstance(node, ast.Assign) and bound_names(node) == ["SPEC"])
        own = script.read_text().count("\n") - (spec.end_lineno - spec.lineno)
        # What is left besides the user's code: header, imports, probe, main.
        assert own < 600 < runtime_lines, f"{script.name}: {own} lines besides SPEC"


def test_a_script_without_its_runtime_says_so(replays, tmp_path):
    _, script, _ = replays[CASES[0]]
    alone = tmp_path / script.name
    alone.write_text(script.read_text())
    run = _replay(alone)
    assert run.returncode == 1 and "repro_runtime.py is missing" in run.stderr and "Traceback" not in run.stderr
    (tmp_path / f"{RUNTIME_MODULE}.py").write_text("RUNTIME_ID = 'older'\n")
    run = _replay(alone)
    assert run.returncode == 1 and "written by another detachlint" in run.stderr and "Traceback" not in run.stderr


def test_the_cases_cover_every_verdict(replays):
    said = {(f["verification"]["status"], f["verification"].get("basis")) for f, _, _ in replays.values() if f and f["verification"]}
    assert {status for status, _ in said} == {"confirmed", "plausible", "inconclusive", "refuted"}
    assert {basis for _, basis in said} >= {"user-code", "stand-in"}
