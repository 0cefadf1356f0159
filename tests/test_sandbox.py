"""Hostile files against `--verify`: each attack runs in a reproduction next
to a real bug, through the command line as a user runs it. Nothing may
outlive the run, change outside the sandbox, leave it over the network,
come back in a report from outside, or touch another finding's verdict; the
real bug stays confirmed."""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import ROOT

pytest.importorskip("torch")

from detachlint.verify import sandbox  # noqa: E402
from detachlint.verify.confine import landlock_abi as confine_landlock_abi  # noqa: E402

HOSTILE = ROOT / "tests" / "data" / "hostile"
SECRET = "detachlint-test-secret-6f1e"


def _verify(tmp_path: Path, name: str, replace: dict = (), env: dict = None, user=None) -> dict:
    """{function name: verification} of DL402's findings in the hostile file
    `name`, copied into a project folder of its own with `replace` applied,
    verified by `detachlint check --verify` in a fresh process."""
    project = tmp_path / "project"
    project.mkdir(exist_ok=True)
    text = (HOSTILE / name).read_text(encoding="utf-8")
    for old, new in dict(replace).items():
        text = text.replace(old, new)
    path = project / name
    path.write_text(text, encoding="utf-8")
    command = [sys.executable, "-m", "detachlint", "check", "--verify", "--no-cache", "--format", "json",
               "--select", "DL402", "--verify-timeout", "10", str(path)]
    full_env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    done = subprocess.run(command, capture_output=True, text=True, env=full_env, timeout=300, cwd=tmp_path, user=user)
    assert done.returncode in (0, 1), done.stderr
    lines = text.splitlines()
    verdicts = {}
    for finding in json.loads(done.stdout):
        # The function the finding sits in: the nearest `def` above it.
        above = next(line for line in reversed(lines[: finding["line"]]) if line.startswith("def "))
        verdicts[above[4:].split("(")[0]] = finding["verification"]
    verdicts["_output"] = done.stdout + done.stderr
    return verdicts


def _real_bug_confirmed(verdicts: dict) -> None:
    real = verdicts["predict"]
    assert real["status"] == "confirmed", real
    assert "Can't call numpy()" in real["evidence"]


def _stale_cgroups() -> list:
    """detachlint's pids cgroups whose run has exited."""
    stale = []
    for parent in sandbox._pids_cgroups():
        for name in os.listdir(parent):
            owner = name[len("detachlint-verify-"):].split("-", 1)[0] if name.startswith("detachlint-verify-") else ""
            if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
                stale.append(os.path.join(parent, name))
    return stale


def _processes_with(marker: str) -> list:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(int(pid))
            except OSError:
                pass
    return found


namespaces = pytest.mark.skipif(
    sandbox.namespaces_available() is None, reason="bubblewrap cannot make namespaces on this machine"
)


@namespaces
def test_no_process_outlives_the_run(tmp_path):
    marker = f"detachlint-linger-{os.getpid()}"
    verdicts = _verify(tmp_path, "escape.py", {"MARKER": marker})
    try:
        assert _processes_with(marker) == []
        # Nor does the pids cgroup a root run makes for it.
        assert _stale_cgroups() == []
        _real_bug_confirmed(verdicts)
        assert "bubblewrap" in verdicts["predict"]["sandbox"]
    finally:
        for pid in _processes_with(marker):
            os.kill(pid, 9)


def _state(path: Path):
    stat = path.stat()
    xattrs = os.listxattr(path) if hasattr(os, "listxattr") else []
    return stat.st_mode, stat.st_mtime_ns, stat.st_ctime_ns, path.read_bytes(), sorted(xattrs)


@namespaces
def test_nothing_outside_the_scratch_folder_changes(tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    victims = [tmp_path / "project" / "data.txt", outside / "data.txt"]
    (tmp_path / "project").mkdir()
    for victim in victims:
        victim.write_text("the user's data")
    before = [_state(victim) for victim in victims]
    verdicts = _verify(tmp_path, "files.py", {"PROJECT_FILE": str(victims[0]), "OUTSIDE_FILE": str(victims[1])})
    assert [_state(victim) for victim in victims] == before
    assert not list(outside.glob("*.moved")) and not list((tmp_path / "project").glob("*.moved"))
    _real_bug_confirmed(verdicts)


@namespaces
def test_no_secret_reaches_a_report(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text(f"password file-{SECRET}")
    verdicts = _verify(tmp_path, "secrets.py", {"OUTSIDE_FILE": str(home / ".netrc")}, env={"API_TOKEN": f"env-{SECRET}"})
    assert SECRET not in verdicts["_output"]
    assert verdicts["leak"]["status"] == "inconclusive"
    assert "leaked" in verdicts["leak"]["evidence"]  # the attack did run, and found nothing
    _real_bug_confirmed(verdicts)


@pytest.mark.skipif(confine_landlock_abi() < 1, reason="no Landlock in this kernel")
def test_without_namespaces_landlock_keeps_outside_files_and_environments_unread(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text(f"password file-{SECRET}")
    verdicts = _verify(tmp_path, "secrets.py", {"OUTSIDE_FILE": str(home / ".netrc")},
                       env={"API_TOKEN": f"env-{SECRET}", sandbox.NO_NAMESPACES: "1"})
    assert SECRET not in verdicts["_output"]
    # It ran, and read nothing outside: its own environment is the worker's cleared one.
    assert "leaked: PATH=" in verdicts["leak"]["evidence"] or "leaked: /usr" in verdicts["leak"]["evidence"], verdicts["leak"]
    containment = verdicts["predict"]["sandbox"]
    assert "bubblewrap" not in containment and "reads only of the system, Python and the project" in containment
    _real_bug_confirmed(verdicts)


@namespaces
def test_memory_and_processes_stay_bounded(tmp_path):
    # The peak resident memory of the whole run, every process in it, as its parent sees it.
    script = (
        "import resource, subprocess, sys; "
        "done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss); print(done.stdout)"
    )
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(HOSTILE / "limits.py", project / "limits.py")
    command = [sys.executable, "-c", script, sys.executable, "-m", "detachlint", "check", "--verify", "--no-cache",
               "--format", "json", "--select", "DL402", "--verify-timeout", "10", str(project / "limits.py")]
    done = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=300)
    peak_kib, report = done.stdout.split("\n", 1)
    assert int(peak_kib) < 2.5 * (1 << 20), f"peak {int(peak_kib) >> 10} MiB"
    findings = {f["line"]: f["verification"] for f in json.loads(report)}
    text = (project / "limits.py").read_text().splitlines()
    line_of = {name: next(n for n, line in enumerate(text, 1) if line.startswith(f"def {name}(")) for name in ("hog", "swarm", "predict")}
    verdict = {name: next(v for line, v in sorted(findings.items()) if line > start) for name, start in line_of.items()}
    assert verdict["hog"]["status"] == "inconclusive"
    started = int(verdict["swarm"]["evidence"].split("started ")[1].split()[0])
    assert started < 100, verdict["swarm"]["evidence"]
    assert verdict["predict"]["status"] == "confirmed", verdict["predict"]


class _Listener:
    """TCP, UDP, unix-path and abstract unix listeners on this machine, recording what reaches them."""

    def __init__(self, folder: Path) -> None:
        self.received = []
        self.sockets = []
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.bind(("127.0.0.1", 0))
        tcp.listen()
        udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        udp.bind(("127.0.0.1", 0))
        self.ports = {"tcp": tcp.getsockname()[1], "udp": udp.getsockname()[1]}
        self.paths = []
        for where in (folder / "project", folder):
            where.mkdir(exist_ok=True)
            unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            unix.bind(str(where / "hostile.sock"))
            unix.listen()
            self.paths.append(str(where / "hostile.sock"))
            self.sockets.append(unix)
        self.abstract = f"detachlint-test-{os.getpid()}"
        abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        abstract.bind("\0" + self.abstract)
        abstract.listen()
        self.sockets += [tcp, abstract]
        self.threads = [threading.Thread(target=self._accept, args=(s,), daemon=True) for s in self.sockets]
        self.threads.append(threading.Thread(target=self._datagrams, args=(udp,), daemon=True))
        self.sockets.append(udp)
        for thread in self.threads:
            thread.start()

    def _accept(self, server) -> None:
        try:
            while True:
                connection, _ = server.accept()
                self.received.append(connection.recv(100) or b"connected")
        except OSError:
            pass

    def _datagrams(self, server) -> None:
        try:
            while True:
                self.received.append(server.recv(100))
        except OSError:
            pass

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


@namespaces
def test_nothing_leaves_over_the_network(tmp_path):
    listener = _Listener(tmp_path)
    try:
        replace = {'{"tcp": 0, "udp": 0}': json.dumps(listener.ports), '["UNIX_PATH"]': json.dumps(listener.paths),
                   "ABSTRACT_NAME": listener.abstract}
        verdicts = _verify(tmp_path, "network.py", replace)
    finally:
        listener.close()
    assert listener.received == []
    _real_bug_confirmed(verdicts)


@namespaces
def test_no_reproduction_reaches_another_verdict(tmp_path):
    verdicts = _verify(tmp_path, "forge.py")
    assert "forged" not in verdicts["_output"]
    _real_bug_confirmed(verdicts)


def test_the_verdict_names_its_containment(tmp_path):
    (tmp_path / "project").mkdir()
    verdicts = _verify(tmp_path, "forge.py")
    containment = verdicts["predict"]["sandbox"]
    assert "seccomp" in containment and "hard limits" in containment
    if sandbox.namespaces_available() is None:
        assert "files outside the project stay readable" in containment
    else:
        assert "bubblewrap" in containment


def test_without_any_sandbox_verify_refuses_unless_told(tmp_path, monkeypatch):
    from detachlint.errors import UsageError
    from detachlint.verify import Verifier, VerifyOptions, confine

    monkeypatch.setattr(sandbox, "namespaces_available", lambda: None)
    monkeypatch.setattr(confine, "landlock_abi", lambda: 0)
    with pytest.raises(UsageError, match="--verify-unconfined"):
        Verifier(VerifyOptions()).start([str(tmp_path)])
    verifier = Verifier(VerifyOptions(unconfined=True))
    verifier.start([str(tmp_path)])
    verifier.close()


def test_limits_hold_against_a_privileged_process():
    """A root process (as CI runs) cannot raise the worker's limits either."""
    script = (
        "import resource\n"
        "from detachlint.verify import confine\n"
        "confine.drop_capabilities()\n"
        "confine.hard_limits(1 << 30, 1 << 20, 8, root_outside=True)\n"
        "filt = confine.Seccomp.build()\n"
        "assert filt is None or filt.load()\n"
        "try:\n"
        "    resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))\n"
        "    print('raised')\n"
        "except (ValueError, OSError):\n"
        "    print('refused')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=60)
    assert done.stdout.strip() == "refused", done.stderr


@namespaces
def test_emitted_scripts_run_in_the_sandbox_unless_told_not_to(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    (home / ".netrc").write_text(f"password file-{SECRET}")
    source = (HOSTILE / "secrets.py").read_text().replace("OUTSIDE_FILE", str(home / ".netrc"))
    (project / "secrets.py").write_text(source)
    emitted = tmp_path / "repro"
    done = subprocess.run([sys.executable, "-m", "detachlint", "check", "--no-cache", "--select", "DL402", "--emit-repro", str(emitted),
                           str(project / "secrets.py")], capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert done.returncode == 1, done.stderr
    (script,) = [path for path in emitted.glob("*.py") if "_L" in path.name and "leak" not in path.name and "secrets_L" in path.name and
                 "def leak" in path.read_text() and "raise RuntimeError" in path.read_text() and
                 path.read_text().count("SPEC") and _line_of_leak(path)]
    env = {"API_TOKEN": f"env-{SECRET}", **os.environ, "PYTHONPATH": str(ROOT)}
    confined = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert "leaked" in confined.stdout, confined.stdout + confined.stderr
    assert SECRET not in confined.stdout + confined.stderr
    # The same script told to run unconfined leaks the file (read first), and
    # the environment after it: the check above can fail.
    env["DETACHLINT_UNCONFINED"] = "1"
    unconfined = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert f"leaked: password file-{SECRET}" in unconfined.stdout, unconfined.stdout


def _line_of_leak(path: Path) -> bool:
    """Whether the emitted script is the one for the finding in `leak`."""
    import re

    match = re.search(r"_L(\d+)_DL402", path.name)
    source = (HOSTILE / "secrets.py").read_text().splitlines()
    line = int(match.group(1))
    above = next(text for text in reversed(source[:line]) if text.startswith("def "))
    return above.startswith("def leak(")
