"""Hostile conditions: fixes that cannot be written, a process killed while
fixing a tree, several processes sharing one cache, and odd inputs from
outside (huge files, paths with spaces and unicode, stdin without a name,
files vanishing mid-run). Each leaves every file whole and says what
happened."""

from __future__ import annotations

import errno
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, run_cli
from detachlint import api
from detachlint.config import Selection
from detachlint.fixer import fix_source
from detachlint.registry import load_rules

# One safe fix (DL701: the `.detach()` a cut did) and one finding without a fix (DL101) per file.
FIXABLE = '''\
import torch
from torch.autograd import Variable


def train(model, loader, optimizer, criterion):
    for x, y in loader:
        out = model(x)
        logged = Variable(out)
        loss = criterion(out, y)
        out.data.clamp_(0, 1)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
'''


def _fixed(source: str) -> str:
    result = fix_source(source.encode(), "f.py", list(load_rules().values()))
    assert result.applied
    return result.source.decode()


@pytest.fixture
def fixable(tmp_path, monkeypatch):
    path = tmp_path / "train.py"
    path.write_text(FIXABLE)
    path.chmod(0o640)
    monkeypatch.chdir(tmp_path)
    return path


def _leftovers(folder: Path):
    return [p.name for p in folder.iterdir() if p.name.endswith(".detachlint")]


@pytest.mark.parametrize(
    "where, error",
    [
        ("os.fsync", OSError(errno.ENOSPC, "No space left on device")),
        ("tempfile.mkstemp", PermissionError(errno.EACCES, "Permission denied")),
        ("os.replace", OSError(errno.EXDEV, "Invalid cross-device link")),
    ],
)
def test_a_fix_that_cannot_be_written_leaves_the_file_untouched(fixable, monkeypatch, where, error):
    module, name = where.split(".")

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(f"detachlint.fixer.{module}.{name}", fail)
    run = api.check(["train.py"], api.CheckOptions(fix=True, no_cache=True))
    assert run.errors == [f"train.py: cannot write the fix: {error.strerror}"]
    assert fixable.read_text() == FIXABLE
    assert fixable.stat().st_mode & 0o777 == 0o640
    assert _leftovers(fixable.parent) == []


def test_fix_keeps_permissions_and_fixes_a_symlinks_target(fixable):
    link = fixable.parent / "link.py"
    link.symlink_to(fixable.name)
    run = api.check(["link.py"], api.CheckOptions(fix=True, no_cache=True))
    assert not run.errors and run.fixed == 1
    assert link.is_symlink() and os.readlink(link) == "train.py"
    assert fixable.read_text() == _fixed(FIXABLE)
    assert fixable.stat().st_mode & 0o777 == 0o640


def test_killing_fix_midway_leaves_every_file_old_or_new(tmp_path):
    """SIGKILL at random moments while `--fix` rewrites 120 files: each file
    is byte for byte either the original or the fully fixed text."""
    tree = tmp_path / "tree"
    old = {}
    for i in range(120):
        path = tree / f"pkg{i % 6}" / f"train_{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        # Vary the files so no two fixes are the same bytes.
        old[path] = FIXABLE + f"\n\nSTEP = {i}\n" + "".join(f"# padding line {j}\n" for j in range(i * 4))
    new = {path: _fixed(text) for path, text in old.items()}
    rng = random.Random(3)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    states = set()
    for trial in range(4):
        for path, text in old.items():
            path.write_text(text)
        process = subprocess.Popen(
            [sys.executable, "-m", "detachlint", "check", "--fix", "--no-cache", "--jobs", "2", str(tree)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
        # Kill shortly after the first file is rewritten: a fixed sleep lands
        # before the start-up ends on a loaded machine.
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            if any(path.read_text() != text for path, text in old.items()):
                break
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.2))
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        for path in old:
            text = path.read_text()
            assert text in (old[path], new[path]), f"{path.name} is half-written after a kill (trial {trial})"
            states.add(text == new[path])
    # The kills landed mid-run at least once: some files fixed, some not.
    assert states == {True, False}


def test_processes_sharing_a_cache_agree_with_a_clean_run(tmp_path):
    """Four processes at once on one cache, cold then warm: every report is
    the clean run's, and the cache still serves a correct report afterwards."""
    tree = tmp_path / "tree"
    for source in sorted((ROOT / "fixtures").glob("*/*.py")):
        target = tree / source.parent.name / source.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
    clean = run_cli("check", "tree", "--select", "ALL", "--format", "json", "--no-cache", cwd=tmp_path)
    assert clean.returncode == 1 and json.loads(clean.stdout)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "detachlint", "check", "tree", "--select", "ALL", "--format", "json", "--jobs", "1", "--cache-dir", "shared"]
    for round_ in ("cold", "warm"):
        processes = [subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(4)]
        for process in processes:
            out, err = process.communicate(timeout=120)
            assert err == b"", (round_, err)
            assert out == clean.stdout, round_
    again = run_cli("check", "tree", "--select", "ALL", "--format", "json", "--cache-dir", "shared", cwd=tmp_path)
    assert again.stdout == clean.stdout


def test_huge_file_is_skipped_with_a_warning(tmp_path):
    (tmp_path / "weights_table.py").write_bytes(b"import torch\nTABLE = [\n" + b"    0.123456789,\n" * 700_000 + b"]\n")
    (tmp_path / "train.py").write_text(FIXABLE)
    result = run_cli("check", ".", "--select", "DL101", cwd=tmp_path)
    assert result.returncode == 1  # train.py's finding; the skip is not a failure
    assert b"detachlint: warning: weights_table.py: skipped: 11,621 KiB is over the 1,024 KiB budget; raise max-file-kb to lint it" in result.stderr
    assert b"train.py:10:" in result.stdout


def test_the_size_budget_is_configurable_and_applies_to_stdin(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.detachlint]\nmax-file-kb = 1\n")
    (tmp_path / "train.py").write_text(FIXABLE + "\n" * 2000)
    result = run_cli("check", "train.py", "--select", "DL101", cwd=tmp_path)
    assert result.returncode == 0
    assert b"train.py: skipped: 2 KiB is over the 1 KiB budget" in result.stderr
    piped = run_cli("check", "-", "--stdin-filename", "train.py", "--select", "DL101", cwd=tmp_path, stdin=(FIXABLE + "\n" * 2000).encode())
    assert piped.returncode == 0 and b"skipped" in piped.stderr


def test_an_analysis_over_its_time_budget_is_skipped_and_the_run_goes_on(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.detachlint]\nmax-file-seconds = 0.000001\n")
    (tmp_path / "train.py").write_text(FIXABLE)
    result = run_cli("check", "train.py", "--select", "DL101", "--no-cache", cwd=tmp_path)
    assert result.returncode == 0
    assert re.search(rb"train\.py: skipped: analysis passed its 1e-06 s budget \([\d.]+ s\); raise max-file-seconds", result.stderr)


@pytest.mark.parametrize("value", ["0", "-3", "true", '"big"'])
def test_a_bad_budget_is_a_usage_error(tmp_path, value):
    (tmp_path / "pyproject.toml").write_text(f"[tool.detachlint]\nmax-file-kb = {value}\n")
    (tmp_path / "train.py").write_text(FIXABLE)
    result = run_cli("check", "train.py", cwd=tmp_path)
    assert result.returncode == 2
    assert b"`tool.detachlint.max-file-kb` must be a positive number" in result.stderr


def test_stdin_without_a_filename_is_reported_as_dash(tmp_path):
    result = run_cli("check", "-", "--select", "DL101", cwd=tmp_path, stdin=FIXABLE.encode())
    assert result.returncode == 1
    assert result.stdout.startswith(b"-:10:9: DL101")


def test_paths_with_spaces_and_unicode(tmp_path):
    folder = tmp_path / "my project" / "modèles ünïcode"
    folder.mkdir(parents=True)
    (folder / "entraînement v2.py").write_text(FIXABLE)
    result = run_cli("check", "my project", "--select", "DL101", "--format", "json", cwd=tmp_path)
    findings = json.loads(result.stdout)
    assert [f["path"] for f in findings] == ["my project/modèles ünïcode/entraînement v2.py"]


def test_a_file_vanishing_mid_run_is_an_error_and_the_run_goes_on(tmp_path, monkeypatch):
    (tmp_path / "a.py").write_text(FIXABLE)
    (tmp_path / "b.py").write_text(FIXABLE)
    original = Path.read_bytes

    def vanish_then_read(self):
        if self.name == "a.py":
            self.unlink()  # deleted between discovery and reading
        return original(self)

    monkeypatch.setattr(Path, "read_bytes", vanish_then_read)
    monkeypatch.chdir(tmp_path)
    run = api.check(["."], api.CheckOptions(jobs=1, no_cache=True, selection=Selection(select=["DL101"])))
    assert run.errors == ["a.py: cannot read: No such file or directory"]
    assert [(f.path, f.code) for f in run.findings] == [("b.py", "DL101")]


def test_linting_leaves_the_cycle_collector_as_it_found_it():
    # The collector waits while a file is analysed (engine._collector_paused).
    import gc

    from detachlint.engine import lint_source

    rules = [rule for rule in load_rules().values() if rule.default_enabled]
    for source in (FIXABLE.encode(), b"import torch\ndef f(:\n"):
        assert gc.isenabled()
        lint_source(source, "train.py", rules)
        assert gc.isenabled()
    gc.disable()
    try:
        lint_source(FIXABLE.encode(), "train.py", rules)
        assert not gc.isenabled()
    finally:
        gc.enable()
