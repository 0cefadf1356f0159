from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


# The `Variable(...)` probe serves DL701 (a cut, `volatile` relied on) and
# DL702 (a wrapper that changes nothing): its tests lint with both rules, and
# each finding keeps the code of the rule that made it.
VARIABLE_RULES = ("DL701", "DL702")


def rule_codes(code: str) -> tuple:
    return VARIABLE_RULES if code in VARIABLE_RULES else (code,)


def pytest_addoption(parser):
    parser.addoption(
        "--update-snapshots", action="store_true", help="rewrite fixture snapshots from the current output"
    )


@pytest.fixture
def update_snapshots(request) -> bool:
    return request.config.getoption("--update-snapshots")


def run_cli(*args: str, cwd=None, stdin: bytes = None, env=None) -> subprocess.CompletedProcess:
    """Run `python -m detachlint` as a user would, in a subprocess."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "detachlint", *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        env=full_env,
        timeout=120,
    )


@pytest.fixture(scope="session")
def verifier(tmp_path_factory):
    """One confined verifier worker for the probe tests: its start-up is paid once."""
    pytest.importorskip("torch")
    from detachlint.verify import Verifier, VerifyOptions

    verifier = Verifier(VerifyOptions(timeout=10.0))
    verifier.start([str(tmp_path_factory.getbasetemp())])
    yield verifier
    verifier.close()


def _verified(verifier, tmp_path: Path, name: str, source: str, code: str) -> list:
    import textwrap

    from detachlint.engine import lint_source
    from detachlint.registry import load_rules

    path = tmp_path / name
    path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
    findings = lint_source(path.read_bytes(), str(path), [load_rules()[c] for c in rule_codes(code)]).findings
    return verifier.verify(findings, lambda display: Path(display).read_text(encoding="utf-8"))


def verify_findings(verifier, tmp_path: Path, name: str, source: str, code: str) -> dict:
    """{line: verification} of rule `code`'s findings in `source`, written to `tmp_path / name`."""
    return {finding.line: finding.verification for finding in _verified(verifier, tmp_path, name, source, code)}


def verifications_by_line(verifier, tmp_path: Path, name: str, source: str, code: str) -> dict:
    """{line: [verification, ...]}: as `verify_findings`, for lines with several
    findings; the rule must find something."""
    verified = _verified(verifier, tmp_path, name, source, code)
    assert verified, f"{code} found nothing"
    found: dict = {}
    for finding in verified:
        found.setdefault(finding.line, []).append(finding.verification)
    return found


def line_of(source: str, text: str) -> int:
    """The 1-based line of `source` (as written to disk) holding `text`."""
    import textwrap

    lines = textwrap.dedent(source).lstrip("\n").splitlines()
    return next(number for number, line in enumerate(lines, start=1) if text in line)
