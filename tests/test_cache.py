"""The per-file cache: same findings warm and cold, damage tolerated, clean."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli
from test_cli import DL101_SOURCE, DL301_SOURCE


def _report(cwd: Path, *extra: str):
    result = run_cli("check", ".", "--format", "json", *extra, cwd=cwd)
    return result.returncode, json.loads(result.stdout)


def test_warm_run_matches_cold_and_parses_nothing(tmp_path, monkeypatch):
    (tmp_path / "train.py").write_text(DL101_SOURCE)
    (tmp_path / "evaluate.py").write_text(DL301_SOURCE)
    cold = _report(tmp_path)
    entries = list((tmp_path / ".detachlint_cache").rglob("*.json"))
    assert len(entries) == 2
    assert _report(tmp_path) == cold

    from detachlint import api, engine

    def no_parse(*args, **kwargs):
        raise AssertionError("a warm run parsed a file")

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(engine, "parse", no_parse)
    run = api.check(["."], api.CheckOptions(jobs=1))
    assert [f.to_json() for f in run.findings] == cold[1]


def test_changed_file_and_damaged_entry_are_linted_again(tmp_path):
    (tmp_path / "train.py").write_text(DL101_SOURCE)
    _report(tmp_path)
    for entry in (tmp_path / ".detachlint_cache").rglob("*.json"):
        entry.write_text("{not json")
    code, data = _report(tmp_path)
    assert code == 1 and [d["code"] for d in data] == ["DL101"]
    (tmp_path / "train.py").write_text(DL101_SOURCE.replace("prob.data.clamp_(0.05, 0.95)", "pass"))
    assert _report(tmp_path) == (0, [])


def test_no_cache_and_cache_dir_and_clean(tmp_path):
    (tmp_path / "train.py").write_text(DL101_SOURCE)
    _report(tmp_path, "--no-cache")
    assert not (tmp_path / ".detachlint_cache").exists()
    _report(tmp_path, "--cache-dir", "elsewhere")
    assert (tmp_path / "elsewhere" / "CACHEDIR.TAG").is_file()
    _report(tmp_path)
    result = run_cli("clean", cwd=tmp_path)
    assert result.returncode == 0 and not (tmp_path / ".detachlint_cache").exists()
    (tmp_path / "precious").mkdir()
    refused = run_cli("clean", "--cache-dir", "precious", cwd=tmp_path)
    assert refused.returncode == 2 and (tmp_path / "precious").is_dir()
