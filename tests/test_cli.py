"""The command line as users and scripts see it: output, exit codes, bad input."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from conftest import run_cli

DL101_SOURCE = textwrap.dedent(
    """\
    import torch

    def train_step(model, x, y, criterion):
        prob = torch.sigmoid(model(x))
        prob.data.clamp_(0.05, 0.95)
        loss = criterion(prob, y)
        loss.backward()
    """
)
DL301_SOURCE = textwrap.dedent(
    """\
    import torch

    def evaluate(model, loader):
        model.eval()
        for x, y in loader:
            out = model(x)
    """
)
CLEAN_SOURCE = "import torch\n\nx = torch.zeros(3)\n"
JSON_KEYS = {"code", "name", "path", "line", "column", "end_line", "end_column", "message", "severity", "fix", "verification", "cell"}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "train.py").write_text(DL101_SOURCE)
    (tmp_path / "evaluate.py").write_text(DL301_SOURCE)
    (tmp_path / "clean.py").write_text(CLEAN_SOURCE)
    return tmp_path


def test_text_output_and_exit_code(project):
    result = run_cli("check", ".", cwd=project)
    out = result.stdout.decode()
    assert result.returncode == 1
    lines = out.splitlines()
    assert lines[0] == "evaluate.py:6:15: DL301 [*] `model` runs with autograd on in this evaluation loop: every batch records a graph and keeps its activations alive until the outputs are freed"
    assert lines[1].startswith("train.py:5:5: DL101 `prob.data.clamp_()` changes `prob`")
    assert lines[-3:] == [
        "Found 2 findings in 3 files.",
        "[*] 1 fixable with --fix.",
        "1 more fixable with --fix --unsafe-fixes.",
    ]


def test_summary_names_unsafe_fixes_alone_without_saying_more(project):
    result = run_cli("check", "train.py", cwd=project)
    assert result.stdout.decode().splitlines()[-2:] == ["Found 1 finding in 1 file.", "1 fixable with --fix --unsafe-fixes."]


def test_concise_marks_fixable_findings(project):
    lines = run_cli("check", ".", "--format", "concise", cwd=project).stdout.decode().splitlines()
    assert lines[0].startswith("evaluate.py:6:15: DL301 [*] `model`")
    assert lines[1].startswith("train.py:5:5: DL101 `prob.data")
    assert len(lines) == 2


def test_clean_exit_zero_and_quiet(project):
    assert run_cli("check", "clean.py", cwd=project).returncode == 0
    result = run_cli("check", ".", "--exit-zero", "--quiet", cwd=project)
    assert result.returncode == 0
    assert len(result.stdout.decode().splitlines()) == 2  # no summary lines


def test_json_contract(project):
    result = run_cli("check", ".", "--format", "json", cwd=project)
    data = json.loads(result.stdout)
    assert [d["code"] for d in data] == ["DL301", "DL101"]
    for item in data:
        assert set(item) == JSON_KEYS
        assert item["verification"] is None
    fix = data[0]["fix"]
    assert fix["applicability"] == "safe" and fix["title"] == "Wrap the loop in `torch.inference_mode()`"
    assert fix["edits"][0]["content"].lstrip().startswith("with torch.inference_mode():")
    assert data[1]["path"] == "train.py" and (data[1]["line"], data[1]["column"]) == (5, 5)


def test_output_file(project):
    result = run_cli("check", ".", "--format", "json", "-o", "report.json", cwd=project)
    assert result.returncode == 1 and result.stdout == b""
    assert len(json.loads((project / "report.json").read_text())) == 2


@pytest.mark.parametrize(
    "args, codes",
    [
        (["--select", "DL101"], ["DL101"]),
        (["--select", "DL3"], ["DL301"]),
        (["--ignore", "DL301"], ["DL101"]),
        (["--select", "DL101", "--extend-select", "DL301"], ["DL301", "DL101"]),
        (["--select", "ALL", "--ignore", "DL1,DL3"], []),
    ],
)
def test_selection(project, args, codes):
    result = run_cli("check", ".", "--format", "json", *args, cwd=project)
    assert [d["code"] for d in json.loads(result.stdout)] == codes


def test_unknown_code_is_a_usage_error(project):
    result = run_cli("check", ".", "--select", "DL999", cwd=project)
    assert result.returncode == 2
    assert result.stderr.decode().strip() == "detachlint: error: the command line: unknown rule code or prefix `DL999` in select"


def test_stdin_with_filename(project):
    result = run_cli("check", "-", "--stdin-filename", "pkg/train.py", stdin=DL101_SOURCE.encode(), cwd=project)
    assert result.returncode == 1
    assert result.stdout.decode().startswith("pkg/train.py:5:5: DL101")


def test_rule_docs_and_list():
    result = run_cli("rule", "dl201")
    assert result.returncode == 0
    out = result.stdout.decode()
    assert out.startswith("# DL201 detach-freezes-upstream")
    assert "## Not flagged" in out
    assert run_cli("rule", "DL999").returncode == 2
    listing = run_cli("rules").stdout.decode().splitlines()
    codes = [line.split()[0].rstrip("*") for line in listing if line.startswith("DL")]
    assert codes == sorted(codes) and {"DL101", "DL201", "DL301"} <= set(codes)
    data = json.loads(run_cli("rules", "--format", "json").stdout)
    assert {d["code"] for d in data} >= {"DL101", "DL201", "DL301"}


def test_version():
    result = run_cli("--version")
    assert result.returncode == 0 and result.stdout.decode().startswith("detachlint ")


def test_no_command_and_bad_flag():
    assert run_cli().returncode == 2
    bad = run_cli("check", "--no-such-flag")
    assert bad.returncode == 2 and b"Traceback" not in bad.stderr


# Bad input -------------------------------------------------------------------


def test_syntax_error_is_dl000_and_the_run_goes_on(project):
    (project / "broken.py").write_text("import torch\n\ndef f(:\n    pass\n")
    result = run_cli("check", ".", "--format", "json", cwd=project)
    data = json.loads(result.stdout)
    broken = [d for d in data if d["path"] == "broken.py"]
    assert broken and broken[0]["code"] == "DL000" and broken[0]["line"] == 3
    assert {d["code"] for d in data} == {"DL000", "DL101", "DL301"}
    assert result.returncode == 1


@pytest.mark.parametrize(
    "content, fragment",
    [
        (b"torch\x00\x01\x02binary", "binary"),
        (b"import torch\nname = '\xff\xfe caf\xe9'\n", "decode"),
        (b"# -*- coding: no-such-codec -*-\nimport torch\n", "decode"),
    ],
)
def test_undecodable_files_are_reported(project, content, fragment):
    (project / "odd.py").write_bytes(content)
    result = run_cli("check", ".", "--format", "json", cwd=project)
    odd = [d for d in json.loads(result.stdout) if d["path"] == "odd.py"]
    assert len(odd) == 1 and odd[0]["code"] == "DL000" and fragment in odd[0]["message"]
    assert b"Traceback" not in result.stderr


def test_latin1_with_coding_cookie_parses(project):
    (project / "latin.py").write_bytes(b"# -*- coding: latin-1 -*-\nimport torch\nname = 'caf\xe9'\n")
    result = run_cli("check", "latin.py", cwd=project)
    assert result.returncode == 0, result.stdout


def test_empty_file_and_bom(project):
    (project / "empty.py").write_bytes(b"")
    (project / "bom.py").write_bytes(b"\xef\xbb\xbf" + DL101_SOURCE.encode())
    result = run_cli("check", "empty.py", "bom.py", "--format", "json", cwd=project)
    data = json.loads(result.stdout)
    assert [(d["path"], d["code"], d["line"]) for d in data] == [("bom.py", "DL101", 5)]


def test_missing_path_is_an_error_but_others_are_linted(project):
    result = run_cli("check", "nope.py", "train.py", cwd=project)
    assert result.returncode == 2
    assert "train.py:5:5: DL101" in result.stdout.decode()
    assert "detachlint: error: nope.py: no such file or directory" in result.stderr.decode()


def test_a_run_that_read_nothing_claims_no_findings(project):
    result = run_cli("check", "nope.py", cwd=project)
    assert result.returncode == 2
    assert result.stdout.decode() == ""  # not "No findings in 0 files."
    assert "detachlint: error: nope.py: no such file or directory" in result.stderr.decode()


def test_broken_symlink_and_directory_named_py(project):
    (project / "dangling.py").symlink_to(project / "gone.py")
    (project / "pkg.py").mkdir()
    (project / "pkg.py" / "inner.py").write_text(DL101_SOURCE)
    result = run_cli("check", ".", "--format", "json", cwd=project)
    assert "pkg.py/inner.py" in {d["path"] for d in json.loads(result.stdout)}
    assert b"Traceback" not in result.stderr


def test_symlink_loop_does_not_hang(project):
    (project / "loop").symlink_to(project)
    result = run_cli("check", ".", cwd=project)
    assert result.returncode == 1 and b"Traceback" not in result.stderr


def test_unreadable_file_is_reported(project, monkeypatch):
    from detachlint import api

    original = Path.read_bytes

    def read_bytes(self):
        if self.name == "train.py":
            raise PermissionError(13, "Permission denied")
        return original(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    monkeypatch.chdir(project)
    run = api.check(["."])
    assert run.errors == ["train.py: cannot read: Permission denied"]
    assert [f.code for f in run.findings] == ["DL301"]


def test_readme_shows_the_real_output_of_the_example_run():
    from conftest import ROOT

    readme = (ROOT / "README.md").read_text()
    shown = readme.split("The first prints:\n\n```\n", 1)[1].split("```", 1)[0]
    result = run_cli("check", "examples", cwd=ROOT)
    assert result.returncode == 1
    assert result.stdout.decode() == shown


# Fixes -----------------------------------------------------------------------


def test_fix_writes_keeps_mode_and_is_idempotent(project):
    target = project / "evaluate.py"
    target.chmod(0o640)
    result = run_cli("check", "evaluate.py", "--fix", cwd=project)
    assert result.returncode == 0, result.stdout
    assert "Fixed 1 finding." in result.stdout.decode()
    text = target.read_text()
    assert "    with torch.inference_mode():\n        for x, y in loader:" in text
    assert oct(target.stat().st_mode & 0o777) == "0o640"
    again = run_cli("check", "evaluate.py", "--fix", cwd=project)
    assert again.returncode == 0 and target.read_text() == text
    assert not list(project.glob(".*.detachlint"))  # no temporary file left


def test_diff_writes_nothing_and_exits_1(project):
    before = (project / "evaluate.py").read_text()
    result = run_cli("check", ".", "--diff", cwd=project)
    assert result.returncode == 1
    out = result.stdout.decode()
    assert out.startswith("--- a/evaluate.py\n+++ b/evaluate.py\n")
    assert "+    with torch.inference_mode():" in out
    assert (project / "evaluate.py").read_text() == before
    clean = run_cli("check", "clean.py", "--diff", cwd=project)
    assert clean.returncode == 0 and clean.stdout == b""


def test_fix_from_stdin_prints_the_fixed_text(project):
    result = run_cli("check", "-", "--fix", stdin=DL301_SOURCE.encode(), cwd=project)
    assert result.returncode == 0
    assert "with torch.inference_mode():" in result.stdout.decode()


def test_a_file_changed_underneath_is_left_alone(project, monkeypatch):
    from detachlint import api, fixer

    target = project / "evaluate.py"
    original = fixer.fix_source

    def racing_fix(source, path, rules, unsafe=False, project=None):
        target.write_text(DL301_SOURCE + "# edited meanwhile\n")
        return original(source, path, rules, unsafe, project)

    monkeypatch.setattr(api, "fix_source", racing_fix)
    monkeypatch.chdir(project)
    run = api.check(["evaluate.py"], api.CheckOptions(fix=True))
    assert run.errors == ["evaluate.py: changed on disk while it was being fixed; left as it was"]
    assert target.read_text().endswith("# edited meanwhile\n")


def test_a_fix_that_would_not_parse_is_refused(project, monkeypatch):
    from types import SimpleNamespace

    from detachlint import fixer

    broken = SimpleNamespace(bytes=b"def broken(:\n")
    monkeypatch.setattr(fixer, "apply_replaces", lambda module, names, fixes: (broken, len(fixes)))
    fixed = fixer.fix_source(DL301_SOURCE.encode(), "evaluate.py", list(__import__("detachlint.registry").registry.load_rules().values()))
    assert fixed.applied == 0 and fixed.source == DL301_SOURCE.encode()


def test_jobs_do_not_change_the_report():
    from conftest import ROOT

    one = run_cli("check", "fixtures", "examples", "--select", "ALL", "--format", "json", "--jobs", "1", cwd=ROOT)
    two = run_cli("check", "fixtures", "examples", "--select", "ALL", "--format", "json", "--jobs", "2", cwd=ROOT)
    assert one.returncode == two.returncode == 1
    assert json.loads(one.stdout) == json.loads(two.stdout) != []
    assert run_cli("check", "--jobs", "0", cwd=ROOT).returncode == 2
