"""`[tool.detachlint]` and `detachlint.toml`: discovery, keys, errors, precedence."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from conftest import run_cli
from test_cli import DL101_SOURCE, DL301_SOURCE


def _codes(result):
    return [(d["path"], d["code"]) for d in json.loads(result.stdout)]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(DL101_SOURCE)
    (tmp_path / "src" / "evaluate.py").write_text(DL301_SOURCE)
    return tmp_path


def _pyproject(root: Path, body: str) -> None:
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n\n[tool.detachlint]\n" + textwrap.dedent(body))


def test_config_found_upward_from_the_linted_path(project):
    _pyproject(project, 'select = ["DL101"]\n')
    result = run_cli("check", "train.py", "evaluate.py", "--format", "json", cwd=project / "src")
    assert _codes(result) == [("train.py", "DL101")]


def test_detachlint_toml_and_ignore(project):
    (project / "detachlint.toml").write_text('ignore = ["DL101"]\n')
    result = run_cli("check", "src", "--format", "json", cwd=project)
    assert _codes(result) == [("src/evaluate.py", "DL301")]


def test_command_line_beats_the_file(project):
    _pyproject(project, 'select = ["DL101"]\n')
    result = run_cli("check", "src", "--select", "DL301", "--format", "json", cwd=project)
    assert _codes(result) == [("src/evaluate.py", "DL301")]
    result = run_cli("check", "src", "--extend-select", "DL301", "--format", "json", cwd=project)
    assert sorted(_codes(result)) == [("src/evaluate.py", "DL301"), ("src/train.py", "DL101")]


def test_per_file_ignores_and_excludes(project):
    _pyproject(
        project,
        """
        extend-exclude = ["src/evaluate.py"]

        [tool.detachlint.per-file-ignores]
        "src/train*.py" = ["DL1"]
        """,
    )
    (project / "src" / "other.py").write_text(DL101_SOURCE)
    result = run_cli("check", ".", "--format", "json", cwd=project)
    assert _codes(result) == [("src/other.py", "DL101")]


def test_exclude_applies_to_files_named_on_the_command_line(project):
    _pyproject(project, 'extend-exclude = ["src/evaluate.py"]\n')
    result = run_cli("check", "src/evaluate.py", "src/train.py", "--format", "json", cwd=project)
    assert _codes(result) == [("src/train.py", "DL101")]


@pytest.mark.parametrize("pattern", ["src", "src/", "./src", "src/*", "src/**", "*.py"])
def test_excludes_as_users_write_them_apply_to_named_files(project, pattern):
    _pyproject(project, f'extend-exclude = ["{pattern}"]\n')
    named = run_cli("check", "src/evaluate.py", "src/train.py", "--format", "json", cwd=project)
    walked = run_cli("check", ".", "--format", "json", cwd=project)
    assert _codes(named) == _codes(walked) == []


def test_a_folder_name_above_the_project_root_excludes_nothing(project, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere") / "build" / "legacy"
    outside.mkdir(parents=True)
    (outside / "train.py").write_text(DL101_SOURCE)
    _pyproject(project, 'extend-exclude = ["legacy", "build"]\n')
    config = str(project / "pyproject.toml")
    named = run_cli("check", str(outside / "train.py"), "--config", config, "--format", "json", cwd=project)
    walked = run_cli("check", str(outside), "--config", config, "--format", "json", cwd=project)
    assert [code for _, code in _codes(named)] == [code for _, code in _codes(walked)] == ["DL101"]


def test_default_excludes_skip_virtualenvs(project):
    (project / ".venv" / "lib").mkdir(parents=True)
    (project / ".venv" / "lib" / "train.py").write_text(DL101_SOURCE)
    result = run_cli("check", ".", "--format", "json", cwd=project)
    assert all(not path.startswith(".venv") for path, _ in _codes(result))


def test_rule_paths_load_a_users_rules(project):
    rules = project / "lint_rules"
    rules.mkdir()
    (rules / "dl901_print_loss.py").write_text(
        textwrap.dedent(
            '''
            import libcst as cst
            from detachlint.rule import Rule

            class PrintLoss(Rule):
                """Printing a loss tensor."""

                code = "DL901"
                name = "print-loss"
                message = "printing `{name}` prints a tensor"

                def visit_Call(self, node):
                    if isinstance(node.func, cst.Name) and node.func.value == "print":
                        for arg in node.args:
                            if isinstance(arg.value, cst.Name) and arg.value.value == "loss":
                                self.report(node, name="loss")
            '''
        )
    )
    (project / "src" / "log.py").write_text("import torch\nloss = torch.ones(1)\nprint(loss)\n")
    _pyproject(project, 'rule-paths = ["lint_rules"]\nselect = ["DL9"]\n')
    result = run_cli("check", "src", "--format", "json", "--allow-rule-paths", cwd=project)
    assert _codes(result) == [("src/log.py", "DL901")]


def test_rule_paths_of_a_linted_tree_run_nothing_unless_allowed(project):
    """A repository's config cannot make a plain `check` run its code."""
    rules = project / "lint_rules"
    rules.mkdir()
    marker = project / "ran.txt"
    (rules / "dl901_hostile.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    (project / "src" / "log.py").write_text("import torch\n")
    _pyproject(project, 'rule-paths = ["lint_rules"]\nselect = ["DL9"]\n[tool.detachlint.per-file-ignores]\n"x/*" = ["DL901"]\n')
    result = run_cli("check", "src", cwd=project)
    assert result.returncode == 0, result.stderr
    assert not marker.exists()
    stderr = result.stderr.decode()
    assert "were not loaded" in stderr and str(rules) in stderr and "--allow-rule-paths" in stderr
    run_cli("check", "src", "--allow-rule-paths", cwd=project)
    assert marker.read_text() == "ran"


@pytest.mark.parametrize(
    "body, expected",
    [
        ('selectt = ["DL101"]\n', "unknown key `tool.detachlint.selectt`"),
        ('select = "DL101"\n', "`tool.detachlint.select` must be a list of strings"),
        ('select = ["DL999"]\n', "unknown rule code or prefix `DL999` in select"),
        ('rule-paths = ["missing"]\n', "`tool.detachlint.rule-paths` names 'missing', which is not a folder"),
        ('per-file-ignores = ["x"]\n', "`tool.detachlint.per-file-ignores` must map globs"),
        ('select = [\n', "not valid TOML"),
        ('severity = {DL301 = "fatal"}\n', "`tool.detachlint.severity` must map rule codes to one of error, warning, info"),
        ('severity = {DL999 = "error"}\n', "unknown rule code `DL999` in severity"),
    ],
)
def test_broken_config_is_one_line_and_exit_2(project, body, expected):
    _pyproject(project, body)
    result = run_cli("check", "src", cwd=project)
    err = result.stderr.decode()
    assert result.returncode == 2
    assert len(err.strip().splitlines()) == 1, err
    assert expected in err and "pyproject.toml" in err
    assert "Traceback" not in err


def test_explicit_config_file(project, tmp_path):
    config = project / "custom.toml"
    config.write_text('select = ["DL301"]\n')
    result = run_cli("check", "src", "--config", str(config), "--format", "json", cwd=project)
    assert _codes(result) == [("src/evaluate.py", "DL301")]
    missing = run_cli("check", "src", "--config", "nope.toml", cwd=project)
    assert missing.returncode == 2 and "config file not found: nope.toml" in missing.stderr.decode()


def test_severity_follows_the_harm_and_the_config_overrides_it(project):
    result = run_cli("check", "src", "--format", "json", cwd=project)
    severities = {d["code"]: d["severity"] for d in json.loads(result.stdout)}
    # DL101 silently changes the gradients; DL301 only records a graph for nothing.
    assert severities == {"DL101": "error", "DL301": "warning"}
    _pyproject(project, '[tool.detachlint.severity]\nDL301 = "error"\nDL101 = "info"\n')
    result = run_cli("check", "src", "--format", "sarif", cwd=project)
    levels = {r["ruleId"]: r["level"] for r in json.loads(result.stdout)["runs"][0]["results"]}
    assert levels == {"DL101": "note", "DL301": "error"}
