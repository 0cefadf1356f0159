from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
