"""Jupyter notebooks: findings by cell in every format, `--fix` that keeps
the notebook's layout, outputs and IPython lines, and `--verify` on cells."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from conftest import ROOT, run_cli

from detachlint.notebook import NotebookError, Program

MODELS = (ROOT / "examples" / "models.py").read_text()
TRAIN = (ROOT / "examples" / "train.py").read_text().replace("from models import Classifier\n", "")


_IDS = iter(range(10**6))


def code(source: str, outputs=None) -> dict:
    return {
        "id": f"cell-{next(_IDS)}",
        "cell_type": "code",
        "execution_count": 3,
        "metadata": {"tags": ["keep-me"]},
        "outputs": outputs if outputs is not None else [{"name": "stdout", "output_type": "stream", "text": ["ok\n"]}],
        "source": source.splitlines(keepends=True),
    }


def markdown(source: str) -> dict:
    return {"id": f"cell-{next(_IDS)}", "cell_type": "markdown", "metadata": {}, "source": source.splitlines(keepends=True)}


def notebook(*cells, language="python") -> dict:
    return {
        "cells": list(cells),
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "language": language, "name": "python3"},
            "language_info": {"name": language, "version": "3.11.7"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def write(path: Path, nb: dict, indent=1) -> Path:
    path.write_text(json.dumps(nb, indent=indent, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def example_notebook(tmp_path) -> Path:
    """The example project's models and training code as notebook cells, with IPython lines."""
    return write(
        tmp_path / "example.ipynb",
        notebook(
            markdown("# The example project\nTrains, then evaluates."),
            code("%matplotlib inline\n!pip install torch\nimport torch"),
            code(MODELS),
            code(TRAIN),
        ),
    )


def test_text_locates_findings_by_cell(example_notebook):
    result = run_cli("check", example_notebook.name, cwd=example_notebook.parent)
    lines = result.stdout.decode().splitlines()
    assert result.returncode == 1
    assert lines[0].startswith("example.ipynb:cell 3:31:20: DL201 `encoder` never gets gradients: the `.detach()` on line 31 ")
    assert lines[1].startswith("example.ipynb:cell 4:15:9: DL101 `prob.data.clamp_()`")
    assert lines[2].startswith("example.ipynb:cell 4:26:18: DL301 [*] `model` runs with autograd on")
    # The lines the findings name are those of the cells.
    cell_4 = TRAIN.splitlines()
    assert cell_4[14].strip().startswith("prob.data.clamp_") and "model(" in cell_4[25]


def test_every_format_carries_the_cell(example_notebook):
    cwd = example_notebook.parent
    data = json.loads(run_cli("check", example_notebook.name, "--format", "json", cwd=cwd).stdout)
    assert [(d["cell"], d["line"], d["code"]) for d in data] == [(3, 31, "DL201"), (4, 15, "DL101"), (4, 26, "DL301")]
    jsonl = [json.loads(line) for line in run_cli("check", example_notebook.name, "--format", "jsonl", cwd=cwd).stdout.splitlines()]
    assert [d["cell"] for d in jsonl] == [3, 4, 4]
    concise = run_cli("check", example_notebook.name, "--format", "concise", cwd=cwd).stdout.decode().splitlines()
    assert concise[2].startswith("example.ipynb:cell 4:26:18: DL301 [*]")
    github = run_cli("check", example_notebook.name, "--format", "github", cwd=cwd).stdout.decode().splitlines()
    assert github[1].startswith("::error file=example.ipynb,title=DL101 data-inplace (cell 4%2C line 15)::")
    sarif = json.loads(run_cli("check", example_notebook.name, "--format", "sarif", cwd=cwd).stdout)
    result = sarif["runs"][0]["results"][1]
    assert result["message"]["text"].startswith("cell 4, line 15: ")
    assert result["properties"]["cell"] == 4 and result["properties"]["line"] == 15
    assert "region" not in result["locations"][0]["physicalLocation"]
    junit = ElementTree.fromstring(run_cli("check", example_notebook.name, "--format", "junit", cwd=cwd).stdout)
    assert "example.ipynb:cell 4:15:9: DL101" in junit.find(".//failure").text


def test_sarif_for_a_notebook_is_valid_sarif(example_notebook):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "tests" / "data" / "sarif-schema-2.1.0.json").read_text())
    sarif = json.loads(run_cli("check", example_notebook.name, "--format", "sarif", cwd=example_notebook.parent).stdout)
    jsonschema.Draft7Validator(schema).validate(sarif)


def test_fix_keeps_the_notebook_valid_its_outputs_and_its_ipython_lines(example_notebook):
    nbformat = pytest.importorskip("nbformat")
    before = json.loads(example_notebook.read_text())
    result = run_cli("check", example_notebook.name, "--fix", "--unsafe-fixes", cwd=example_notebook.parent)
    assert "Fixed 2 findings." in result.stdout.decode()
    text = example_notebook.read_text()
    after = json.loads(text)
    nbformat.validate(nbformat.reads(text, as_version=4))
    # Only the fixed cell's source changed: outputs, metadata, other cells are as they were.
    for old, new in zip(before["cells"], after["cells"]):
        assert {k: v for k, v in old.items() if k != "source"} == {k: v for k, v in new.items() if k != "source"}
    assert before["metadata"] == after["metadata"]
    assert after["cells"][1]["source"] == ["%matplotlib inline\n", "!pip install torch\n", "import torch"]
    assert [c["source"] for c in after["cells"][:3]] == [c["source"] for c in before["cells"][:3]]
    fixed_cell = "".join(after["cells"][3]["source"])
    assert "prob = prob.clamp(1e-4, 1 - 1e-4)" in fixed_cell
    assert "    with torch.inference_mode():\n        for images, labels in loader:" in fixed_cell
    # The layout is the file's own: same indentation, same key order.
    assert text == json.dumps(after, indent=1, ensure_ascii=False) + "\n"
    # A second --fix changes nothing.
    again = run_cli("check", example_notebook.name, "--fix", "--unsafe-fixes", cwd=example_notebook.parent)
    assert "Fixed" not in again.stdout.decode()
    assert example_notebook.read_text() == text


def test_diff_shows_the_change_and_writes_nothing(example_notebook):
    original = example_notebook.read_bytes()
    result = run_cli("check", example_notebook.name, "--diff", cwd=example_notebook.parent)
    out = result.stdout.decode()
    assert '+    "    with torch.inference_mode():\\n",' in out
    assert example_notebook.read_bytes() == original


def test_a_folder_walk_finds_notebooks(example_notebook):
    result = run_cli("check", ".", "--format", "json", cwd=example_notebook.parent)
    assert {d["path"] for d in json.loads(result.stdout)} == {"example.ipynb"}


def test_suppressions_in_cells(tmp_path):
    source = "import torch\n\ndef evaluate(model, loader):\n    model.eval()\n    return [model(x) for x in loader]  # noqa: DL301\n"
    loop = "def score(model, loader):\n    model.eval()\n    total = 0\n    for x in loader:\n        total += model(x).sum().item()  # noqa: DL3\n    return total\n"
    path = write(tmp_path / "quiet.ipynb", notebook(code(source), code(loop)))
    result = run_cli("check", path.name, cwd=tmp_path)
    assert result.returncode == 0, result.stdout.decode()


def test_cell_magics_and_shell_assignments_are_not_python(tmp_path):
    cells = [
        code("%%bash\necho $((1 + 1))\nfor f in *; do echo $f; done"),
        code("files = !ls\nimport torch\nmodel = torch.nn.Linear(2, 2)\nmodel?"),
        code("%%time\nmodel.eval()\nfor x in loader:\n    print(model(x))"),
    ]
    path = write(tmp_path / "magic.ipynb", notebook(*cells))
    data = json.loads(run_cli("check", path.name, "--format", "json", cwd=tmp_path).stdout)
    assert [(d["code"], d["cell"], d["line"]) for d in data] == [("DL301", 3, 4)]


def test_not_a_notebook_is_a_dl000_and_the_run_goes_on(tmp_path, example_notebook):
    (example_notebook.parent / "broken.ipynb").write_text("{ not json")
    write(example_notebook.parent / "old.ipynb", {"worksheets": [], "nbformat": 3})
    result = run_cli("check", ".", "--format", "json", cwd=example_notebook.parent)
    data = json.loads(result.stdout)
    messages = {d["path"]: d["message"] for d in data if d["code"] == "DL000"}
    assert messages["broken.ipynb"].startswith("not a notebook: the file is not valid JSON")
    assert messages["old.ipynb"].startswith("nbformat 3 notebooks are not read")
    assert any(d["path"] == "example.ipynb" for d in data)
    assert result.returncode == 1 and not result.stderr


def test_a_notebook_in_another_language_is_not_ours(tmp_path):
    path = write(tmp_path / "r.ipynb", notebook(code("library(torch)\nx <- torch_randn(3)"), language="R"))
    result = run_cli("check", path.name, cwd=tmp_path)
    assert result.returncode == 0 and "No findings in 1 file." in result.stdout.decode()


def test_a_syntax_error_is_located_in_its_cell(tmp_path):
    path = write(tmp_path / "typo.ipynb", notebook(code("import torch"), code("x = (1,\ny = 2")))
    data = json.loads(run_cli("check", path.name, "--format", "json", cwd=tmp_path).stdout)
    assert [(d["code"], d["cell"]) for d in data] == [("DL000", 2)]


def test_program_round_trip_is_exact_without_fixes(example_notebook):
    raw = example_notebook.read_bytes()
    program = Program.from_bytes(raw)
    assert program.with_program(program.text) == raw
    with pytest.raises(NotebookError, match="across cells"):
        program.with_program(program.text.replace("# detachlint-cell: 3\n", ""))


@pytest.mark.slow
def test_verify_runs_on_a_notebooks_cells(example_notebook):
    pytest.importorskip("torch")
    result = run_cli("check", example_notebook.name, "--verify", "--format", "json", cwd=example_notebook.parent)
    data = json.loads(result.stdout)
    by_code = {d["code"]: d for d in data}
    assert by_code["DL201"]["cell"] == 3 and by_code["DL201"]["verification"]["status"] == "confirmed"
    assert "`encoder.conv1.weight`" in by_code["DL201"]["verification"]["evidence"]
    assert by_code["DL301"]["verification"]["status"] == "confirmed"
    assert by_code["DL301"]["line"] == 26


def test_a_cell_that_is_not_python_is_reported_and_the_others_are_linted(tmp_path):
    """Exercise notebooks leave blanks (`lr = `): the other cells still count."""
    eval_cell = "model.eval()\nfor x in loader:\n    print(model(x))"
    cells = [
        code("import torch\nmodel = torch.nn.Linear(2, 2)"),
        code("lr = \nepochs = 3"),
        code("torch.*Tensor?"),
        code(eval_cell),
    ]
    path = write(tmp_path / "exercise.ipynb", notebook(*cells))
    data = json.loads(run_cli("check", path.name, "--format", "json", cwd=tmp_path).stdout)
    assert [(d["code"], d["cell"], d["line"]) for d in data] == [("DL000", 2, 1), ("DL301", 4, 3)]
    assert data[0]["message"].startswith("cannot parse: ")
    # --fix leaves the broken cell exactly as it was.
    run_cli("check", path.name, "--fix", cwd=tmp_path)
    after = json.loads(path.read_text())
    assert [c["source"] for c in after["cells"][:3]] == [c["source"] for c in cells[:3]]
    assert "inference_mode" in "".join(after["cells"][3]["source"])


# Cells as IPython runs them.

TRAIN_CELL = """\
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    loss = model(torch.randn(16, 4)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print('epoch %d, loss %.4f'
          % (epoch + 1, loss.item()))
%matplotlib inline"""


def test_a_percent_that_continues_a_statement_is_python_not_a_magic(tmp_path):
    path = write(tmp_path / "d2l.ipynb", notebook(code("import torch\nfrom torch import nn"), code(TRAIN_CELL)))
    data = json.loads(run_cli("check", path.name, "--format", "json", "--select", "ALL", cwd=tmp_path).stdout)
    assert [d for d in data if d["code"] == "DL000"] == []
    program = Program.from_bytes(path.read_bytes())
    # The continuation stays Python; the magic on its own line is hidden.
    assert "          % (epoch + 1, loss.item()))" in program.text
    assert "%matplotlib" not in program.text and program.magics == ["%matplotlib inline"]


def test_magics_inside_strings_and_brackets_stay_text():
    lines = ['text = """', "%not a magic", '"""', "values = [10", "    % 3]", "total = 10 \\", "% 4", "!ls"]
    hidden = Program.from_bytes(json.dumps(notebook(code("\n".join(lines)))).encode())
    assert hidden.magics == ["!ls"]


INDENTED_CELL = """\
    features = encoder(images)
    features.detach()
    logits = head(features)"""


def test_an_indented_cell_is_dedented_as_ipython_does_and_put_back_by_fix(tmp_path):
    setup = code("import torch\nfrom torch import nn\nencoder = nn.Linear(4, 4)\nhead = nn.Linear(4, 2)\nimages = torch.randn(2, 4)")
    path = write(tmp_path / "indented.ipynb", notebook(setup, code(INDENTED_CELL)))
    data = json.loads(run_cli("check", path.name, "--format", "json", "--select", "ALL", cwd=tmp_path).stdout)
    assert [(d["code"], d["cell"], d["line"], d["column"]) for d in data] == [("DL206", 2, 2, 5)]
    run_cli("check", path.name, "--fix", "--unsafe-fixes", "--select", "DL206", cwd=tmp_path)
    fixed = "".join(json.loads(path.read_text())["cells"][1]["source"])
    assert fixed == INDENTED_CELL.replace("    features.detach()", "    features = features.detach()")


def test_a_cells_last_expression_is_displayed_not_thrown_away(tmp_path):
    setup = "import torch\nfrom torch import nn\nmodel = nn.Linear(4, 2)\nout = model(torch.randn(3, 4))\n"
    cells = [code(setup + "out.detach()"), code("out.detach()\nsize = out.shape"), code("out.detach();")]
    path = write(tmp_path / "display.ipynb", notebook(*cells))
    data = json.loads(run_cli("check", path.name, "--format", "json", "--select", "DL206", cwd=tmp_path).stdout)
    # Shown by the notebook in cell 1; thrown away in cell 2 (not last) and cell 3 (`;`).
    assert [(d["cell"], d["line"]) for d in data] == [(2, 1), (3, 1)]


def test_the_html_report_shows_the_cells_as_written(tmp_path):
    cells = [code("import torch\nmodel = torch.nn.Linear(2, 2)"), code("lr = \nepochs = 3"), code("    model.eval()\n    for x in loader:\n        print(model(x))")]
    path = write(tmp_path / "report.ipynb", notebook(*cells))
    run_cli("check", path.name, "--format", "html", "--output", "report.html", "--exit-zero", cwd=tmp_path)
    page = (tmp_path / "report.html").read_text()
    assert "lr = " in page and "    for x in loader:" in page
    assert "detachlint-magic" not in page
