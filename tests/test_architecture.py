"""Layers import downward only; the static linter never imports torch;
a wheel carries the built-in rules without a top-level `rules` package."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT

# A module may import only from layers at or below its own.
LAYERS = [
    {"errors", "finding"},
    {"analysis"},
    {"rule", "suppression", "fixing", "sections"},
    {"engine", "registry", "config", "discovery", "fixer", "cache", "notebook"},
    {"verify"},
    {"api", "report", "docs"},
    # Front ends: the command line, the language server, the flake8 plugin.
    {"cli", "__main__", "lsp", "flake8_plugin"},
]


def _layer(module: str) -> int:
    for level, names in enumerate(LAYERS):
        if module in names:
            return level
    raise AssertionError(f"detachlint.{module} is in no layer")


def _imports(path: Path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("detachlint."):
            yield node.module.split(".")[1]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("detachlint."):
                    yield alias.name.split(".")[1]


def test_imports_point_down():
    package = ROOT / "detachlint"
    for path in package.rglob("*.py"):
        relative = path.relative_to(package).parts
        own = relative[0][:-3] if len(relative) == 1 else relative[0]
        if own == "__init__":
            continue
        for imported in _imports(path):
            assert _layer(imported) <= _layer(own), f"{path.relative_to(ROOT)} imports detachlint.{imported}"


def test_rules_import_only_the_rule_api_and_analysis():
    for path in (ROOT / "rules").glob("*.py"):
        for imported in _imports(path):
            assert imported in {"rule", "analysis"}, f"{path.name} imports detachlint.{imported}"


def test_the_instance_is_found_by_position_never_by_the_word_self():
    """A method's instance is its first parameter (`FileIndex.receiver`);
    the word `self` is a prior for functions cut out of a class, in
    analysis/priors.py, and nowhere else in the analysis or the rules."""
    spelled = re.compile(r"""(==|!=|in|startswith\() ?\(?["']self\b|["']self["'],""")
    offenders = []
    for path in [*sorted((ROOT / "detachlint" / "analysis").glob("*.py")), *sorted((ROOT / "rules").glob("dl*.py"))]:
        if path.name == "priors.py":
            continue
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if spelled.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_static_run_never_imports_torch(tmp_path):
    (tmp_path / "a.py").write_text("import torch\n\ndef f(model, x):\n    return model(x).data.zero_()\n")
    code = (
        "import sys; from detachlint.api import check; check([sys.argv[1]]);"
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, env=env, timeout=60)


@pytest.mark.slow
def test_wheel_carries_the_builtin_rules(tmp_path):
    # Built from a copy: a stale `build/` folder in the checkout would leak old files into the wheel.
    source = tmp_path / "source"
    skipped = shutil.ignore_patterns("build", "dist", ".git", ".venv", "*.egg-info", ".*cache", ".hypothesis")
    shutil.copytree(ROOT, source, ignore=skipped)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
        check=True,
        timeout=300,
    )
    wheel = next(tmp_path.glob("detachlint-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "detachlint/_builtin_rules/dl101_data_inplace.py" in names
    assert not any(name.startswith("rules/") for name in names)
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    # Run from elsewhere, with only the unpacked wheel on the path.
    env = dict(os.environ, PYTHONPATH=str(site))
    listing = subprocess.run(
        [sys.executable, "-m", "detachlint", "rules"], cwd=tmp_path, env=env, capture_output=True, timeout=60
    )
    assert listing.returncode == 0, listing.stderr
    codes = [line.split()[0].rstrip("*") for line in listing.stdout.decode().splitlines() if line.startswith("DL")]
    assert codes == sorted(p.name[:5].upper() for p in (ROOT / "rules").glob("dl*.py"))
