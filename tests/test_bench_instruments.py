"""The instruments that measure what generalises: the renaming transform,
blind batches, the placement matrix and the real-code judging sheet.
Their slow evidence runs (every renamed case, every matrix file, with torch)
are marked `evidence` and run by `pytest -m evidence`."""

from __future__ import annotations

import ast
import importlib
import json
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

BENCH = ROOT / "bench"
sys.path.insert(0, str(BENCH / "bugs"))
sys.path.insert(0, str(BENCH))
cases = importlib.import_module("cases")
rename = importlib.import_module("rename")
score = importlib.import_module("score")
placement = importlib.import_module("placement")
realcode_sample = importlib.import_module("realcode_sample")
for folder in (BENCH, BENCH / "bugs"):
    sys.path.remove(str(folder))

UNFAITHFUL = BENCH / "bugs" / "renamed_unfaithful.txt"

TRAINER = '''\
import argparse
import torch
from torch import nn


class Trainer:
    def __init__(self, encoder, head, lr=0.1):
        self.encoder = encoder
        self.head = head
        self.weight = 2.0
        self.opt = torch.optim.SGD([*encoder.parameters(), *head.parameters()], lr=lr)

    def fit_step(self, x, y):
        feats = self.encoder(x).detach()
        loss = nn.functional.mse_loss(self.head(feats), y) * self.weight
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return {"loss": loss.item()}


def build(width, depth=1):
    return nn.Linear(width, width), nn.Linear(width, depth)


if __name__ == "__main__":
    args = argparse.Namespace(width=4)
    enc, head = build(width=args.width)
    trainer = Trainer(encoder=enc, head=head, lr=0.05)
    print(trainer.fit_step(torch.randn(3, 4), torch.randn(3, 1))["loss"] >= 0)
'''


def test_rename_renames_the_authors_names_and_keeps_apis_and_lines():
    renamed, mapping = rename.rename_source(TRAINER, api=rename.api_names())
    assert len(renamed.splitlines()) == len(TRAINER.splitlines())
    tree = ast.parse(renamed)
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    attrs = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    # The author's classes, functions, methods, parameters, locals, self and attributes go.
    for chosen in ("Trainer", "build", "feats", "trainer", "enc", "self", "x", "depth"):
        assert chosen in mapping and chosen not in names, chosen
    assert {"encoder", "head", "opt", "fit_step"} <= set(mapping) and not {"encoder", "opt", "fit_step"} & attrs
    # Imports, torch's API, builtins, and an attribute also named by an API stay.
    assert {"torch", "nn", "argparse", "print"} <= names
    assert {"backward", "zero_grad", "step", "detach", "parameters", "mse_loss", "item", "weight"} <= attrs
    # Keywords follow their function: renamed into the file's own, kept into torch's and argparse's.
    calls = {ast.unparse(c.func): [k.arg for k in c.keywords] for c in ast.walk(tree) if isinstance(c, ast.Call)}
    assert calls["torch.optim.SGD"] == ["lr"]
    # `args.width` comes back as an attribute of the Namespace: `width` is kept everywhere.
    assert calls["argparse.Namespace"] == ["width"] and "width" not in mapping
    assert calls[mapping["Trainer"]] == [mapping["encoder"], mapping["head"], "lr"]  # lr: a keyword of SGD too
    # A name spelt in a string ({"loss": ...}) keeps its name wherever it is.
    assert "loss" not in mapping and "loss" in names


def test_renamed_source_runs_as_the_original(tmp_path):
    original = tmp_path / "a.py"
    renamed = tmp_path / "b.py"
    original.write_text(TRAINER)
    renamed.write_text(rename.rename_source(TRAINER, api=rename.api_names())[0])
    outputs = [subprocess.run([sys.executable, str(p)], capture_output=True, text=True, timeout=120) for p in (original, renamed)]
    if "No module named 'torch'" in outputs[0].stderr:
        pytest.skip("torch is not installed")
    assert [o.returncode for o in outputs] == [0, 0] and outputs[0].stdout == outputs[1].stdout, outputs[1].stderr


def test_new_names_never_collide_with_names_already_there():
    source = "n1 = 3\ndef f(a):\n    return a + n1\nprint(f(2))\n"
    renamed, mapping = rename.rename_source(source, api=set())
    assert "n1" not in mapping.values() and mapping["n1"] != "n1"
    scope: dict = {}
    exec(compile(renamed.replace("print(", "result = ("), "x", "exec"), scope)
    assert scope["result"] == 5


def test_every_case_renames_with_its_header_and_line_count(tmp_path):
    paths = cases.case_paths()
    written = rename.rename_tree(BENCH / "bugs", tmp_path, paths)
    assert len(written) == len(paths) and (tmp_path / "judged.txt").exists()
    for original, renamed in written.items():
        before, after = original.read_text().splitlines(), renamed.read_text().splitlines()
        assert before[:4] == after[:4] and len(before) == len(after), original
        compile("\n".join(after), str(renamed), "exec")


def test_batches_are_listed_and_recorded():
    listings = sorted((BENCH / "bugs" / "batches").glob("*.txt"))
    assert listings, "no blind batch yet"
    table = (BENCH / "bugs" / "BATCHES.md").read_text()
    names_in_batches = []
    for listing in listings:
        batch = cases.batch_cases(listing.stem)
        assert len(batch) >= 30, listing.stem
        bugs = sum(c.is_bug for c in batch)
        row = re.search(rf"^\| {re.escape(listing.stem)} \| {len(batch)} \({bugs} / {len(batch) - bugs}\) \| [0-9a-f]{{7,}}(?:, [0-9a-f]{{7,}})* \|", table, re.M)
        assert row, f"BATCHES.md has no first-sight row for {listing.stem} with its counts"
        names_in_batches += [c.name for c in batch]
    assert len(names_in_batches) == len(set(names_in_batches)), "a case sits in two batches"


def test_unknown_batch_is_a_clear_error():
    with pytest.raises(ValueError, match="no batch 'nope'"):
        cases.batch_cases("nope")
    done = subprocess.run([sys.executable, str(BENCH / "bugs" / "score.py"), "--batch", "nope"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "no batch 'nope'" in done.stderr and "Traceback" not in done.stderr


def _matrix_file(root, code, stem, expect, body):
    folder = root / code
    folder.mkdir(exist_ok=True)
    header = f"# source: placement matrix\n# category: {code}\n# expect: {expect}\n# evidence: -\n"
    (folder / f"{stem}.py").write_text(header + textwrap.dedent(body))


EVAL = """\
    import torch
    from torch import nn

    net = nn.Linear(2, 2)
    net.eval()
    outs = []
    for xb in [torch.randn(1, 2)] * 3:
        outs.append(net(xb))
    """


EVAL_NO_GRAD = """\
    import torch
    from torch import nn

    net = nn.Linear(2, 2)
    net.eval()
    outs = []
    with torch.no_grad():
        for xb in [torch.randn(1, 2)] * 3:
            outs.append(net(xb))
    """


def test_placement_scores_per_placement_hazard_and_spelling(tmp_path):
    _matrix_file(tmp_path, "DL301", "bug_module", "flag 11, 12", EVAL)
    _matrix_file(tmp_path, "DL301", "bug_spelling_for", "flag 11, 12", EVAL)
    _matrix_file(tmp_path, "DL301", "ok_module", "clean", EVAL_NO_GRAD)
    _matrix_file(tmp_path, "DL301", "bug_helper", "flag 5", EVAL)  # the line names nothing the rule flags: a miss
    outcomes = score.run(cases.load_cases(tmp_path))
    shapes = sorted(placement.shape(o) for o in outcomes)
    assert shapes == ["helper", "module", "module", "spelling:for"]
    summary = placement.summarise(outcomes)
    assert summary["grid"]["DL301"] == {"module": True, "helper": False}
    assert summary["spelling"]["DL301 for"]["recall"] == 1.0
    assert summary["placement"]["module"]["flagged_look_alikes"] == 0
    text = placement.report(outcomes)
    assert "DL301/bug_helper.py: expected line 5" in text and "| DL301 | caught | – | – | missed |" in text


def test_placement_matrix_covers_every_hazard_in_four_placements():
    matrix = cases.load_cases(BENCH / "placement")
    by_code = {}
    for case in matrix:
        by_code.setdefault(case.category, set()).add(case.path.stem)
    from detachlint.registry import load_rules

    hazards = sorted(code for code, rule in load_rules().items() if not code.startswith("DL0") and rule.harm != "style")
    assert sorted(by_code) == hazards
    for code, stems in by_code.items():
        for kind in ("bug", "ok"):
            assert {f"{kind}_{p}" for p in placement.PLACEMENTS} <= stems, code
        spelt = {s.split("_", 1)[1] for s in stems if "_spelling_" in s}
        for stem in spelt:
            assert {f"bug_{stem}", f"ok_{stem}"} <= stems, f"{code}: {stem} has no twin"


def test_sample_draws_every_rule_and_repository_and_scores_a_judged_sheet(tmp_path):
    from detachlint.finding import Finding

    repos = [tmp_path / "a+one", tmp_path / "b+two"]
    findings = []
    for number, repo in enumerate(repos):
        repo.mkdir()
        path = repo / "train.py"
        path.write_text("x = 1\n" * 30)
        for line in range(1, 11):
            code = "DL301" if (number, line) == (1, 3) else "DL701"
            findings.append(Finding(path=str(path), line=line, column=1, code=code, name="n", end_line=line,
                                    end_column=2, message=f"message {line}", severity="warning"))
    sample = realcode_sample.draw(findings, repos, size=4, per_rule=2, per_repo=1, seed=3)
    assert len(sample) == 4 and any(f.code == "DL301" for f in sample)
    assert {realcode_sample._root_of(f, repos) for f in sample} == {str(r.resolve()) for r in repos}
    assert sample == realcode_sample.draw(findings, repos, size=4, per_rule=2, per_repo=1, seed=3)
    sheet = tmp_path / "sheet.md"
    realcode_sample.write_sheet(sample, repos, len(findings), 3, sheet)
    text = sheet.read_text()
    assert text.count("verdict: \n") == 4 and "b/two train.py:3" in text and ">    3  x = 1" in text
    assert realcode_sample.score(sheet) == 2  # not judged yet
    verdicts = iter(["true", "harmless", "false", "true"])
    sheet.write_text(re.sub(r"verdict: \nact: \nwhy: ", lambda m: f"verdict: {next(verdicts)}\nact: yes\nwhy: read it", text))
    assert realcode_sample.score(sheet) == 0


def test_judged_real_code_sheets_are_complete():
    sheets = sorted((BENCH / "judged").glob("realcode-*.md"))
    assert sheets
    for sheet in sheets:
        entries = realcode_sample.read_sheet(sheet)
        assert len(entries) >= 60 and len({e["repo"] for e in entries}) >= 10, sheet.name
        assert all(e.get("verdict") in realcode_sample.VERDICTS and e.get("act") in ("yes", "no") and e.get("why") for e in entries), sheet.name


def test_sample_refuses_repositories_tuned_on(tmp_path):
    tuned = tmp_path / "pytorch+examples"
    tuned.mkdir()
    done = subprocess.run([sys.executable, str(BENCH / "realcode_sample.py"), str(tuned), "--sheet", str(tmp_path / "s.md")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "tuned on before" in done.stderr


def _evidence(paths, tmp_path):
    pytest.importorskip("torch")
    done = subprocess.run([sys.executable, str(BENCH / "bugs" / "evidence.py"), "--jsonl", *map(str, paths)],
                          capture_output=True, text=True, timeout=3600, cwd=tmp_path)
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(paths), done.stderr[-2000:]
    return {r["case"]: r for r in results}


@pytest.mark.evidence
def test_renamed_cases_run_as_the_originals(tmp_path):
    """Every renamed case still holds its evidence, except the ones listed in
    renamed_unfaithful.txt (names the program reads from strings or passes
    through `**kwargs`): those are scored renamed all the same, and listed."""
    written = rename.rename_tree(BENCH / "bugs", tmp_path / "renamed", cases.case_paths())
    results = _evidence(list(written.values()), tmp_path)
    failing = {name for name, r in results.items() if not r["holds"]}
    listed = {line.split()[0] for line in UNFAITHFUL.read_text().splitlines() if line.strip() and not line.startswith("#")}
    assert failing == listed, {name: results[name]["output"][-400:] for name in failing ^ listed if name in results}


@pytest.mark.evidence
def test_placement_matrix_evidence_holds(tmp_path):
    paths = cases.case_paths(BENCH / "placement")
    results = _evidence(paths, tmp_path)
    broken = {name: r["output"][-600:] for name, r in results.items() if not r["holds"]}
    assert not broken, broken
