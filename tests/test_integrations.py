"""detachlint where users meet it: a real pre-commit run against a temporary
git repository, and flake8 running the rules through the entry point."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

BUGGY = (ROOT / "examples" / "train.py").read_text()
CLEAN = "import torch\n\n\ndef scale(x):\n    return torch.relu(x) * 2\n"


def _notebook(source: str) -> str:
    import json

    cell = {"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {}, "outputs": [], "source": source.splitlines(keepends=True)}
    return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1) + "\n"


def git(*args: str, cwd: Path) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def hook_repository(tmp_path: Path) -> tuple:
    """This project's current sources as a git repository, and its commit."""
    source = tmp_path / "detachlint-src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copy(ROOT / name, source / name)
    for folder in ("detachlint", "rules"):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    git("init", "-q", cwd=source)
    git("add", ".", cwd=source)
    git("commit", "-q", "-m", "detachlint", cwd=source)
    return source, git("rev-parse", "HEAD", cwd=source).strip()


@pytest.mark.slow
def test_pre_commit_hook_fails_on_a_finding_and_passes_clean_code(tmp_path):
    pre_commit = shutil.which("pre-commit", path=str(Path(sys.executable).parent)) or shutil.which("pre-commit")
    if pre_commit is None:
        pytest.skip("pre-commit is not installed (it is in the dev extra)")
    source, commit = hook_repository(tmp_path)
    project = tmp_path / "project"
    project.mkdir()
    git("init", "-q", cwd=project)
    (project / ".pre-commit-config.yaml").write_text(
        f"repos:\n  - repo: {source}\n    rev: {commit}\n    hooks:\n      - id: detachlint\n"
    )
    (project / "train.py").write_text(BUGGY)
    # An exclude written as a folder keeps the hook off the files pre-commit names in it.
    (project / "legacy").mkdir()
    (project / "legacy" / "old_train.py").write_text(BUGGY)
    (project / "pyproject.toml").write_text('[tool.detachlint]\nextend-exclude = ["legacy/"]\n')
    # A notebook goes through the hook too (types_or: jupyter).
    (project / "analysis.ipynb").write_text(_notebook(BUGGY))
    git("add", ".", cwd=project)
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"))
    env.pop("PYTHONPATH", None)

    def run_hooks():
        return subprocess.run(
            [pre_commit, "run", "--all-files", "--color", "never"], cwd=project, env=env, capture_output=True, text=True, timeout=900
        )

    failed = run_hooks()
    print(failed.stdout)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "detachlint" in failed.stdout and "Failed" in failed.stdout
    assert "train.py:16:9: DL101" in failed.stdout
    assert "legacy" not in failed.stdout
    assert "analysis.ipynb:cell 1:16:9: DL101" in failed.stdout

    (project / "train.py").write_text(CLEAN)
    # The notebook as `detachlint check --fix --unsafe-fixes` leaves it.
    from detachlint.api import CheckOptions, check

    fixed = check([str(project / "analysis.ipynb")], CheckOptions(fix=True, unsafe_fixes=True, no_cache=True))
    assert fixed.fixed == 2 and not fixed.findings
    git("add", ".", cwd=project)
    passed = run_hooks()
    print(passed.stdout)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "Passed" in passed.stdout


@pytest.mark.slow
def test_flake8_runs_the_rules_through_its_entry_point(tmp_path):
    flake8 = shutil.which("flake8", path=str(Path(sys.executable).parent))
    if flake8 is None:
        pytest.skip("flake8 is not installed (it is in the dev extra)")
    (tmp_path / "train.py").write_text(BUGGY)
    (tmp_path / "clean.py").write_text(CLEAN)
    result = subprocess.run([flake8, "--select", "DL", "train.py", "clean.py"], cwd=tmp_path, capture_output=True, text=True)
    print(result.stdout)
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split(" ")[0:2] for line in lines] == [["train.py:16:9:", "DL101"], ["train.py:27:18:", "DL301"]]
    assert "behind autograd's back" in lines[0]
    # flake8's own `# noqa` and --extend-ignore apply to DL codes.
    ignored = subprocess.run(
        [flake8, "--select", "DL", "--extend-ignore", "DL301", "train.py"], cwd=tmp_path, capture_output=True, text=True
    )
    assert [line.split(" ")[1] for line in ignored.stdout.splitlines()] == ["DL101"]
