"""The probes' one registry and the runtime's layout, checked without torch.

Each probed rule has a probe module beside it (`rules/probes/dl101.py`);
the files that exist are the list of probed rules, for the linter (`PROBED`)
and for the worker (`runtime.verdict.PROBES`) alike, and each rule's
`## Verification` docs must agree with it. The runtime and the probes use
only the standard library, torch and the runtime itself, which is what lets
`--emit-repro` copy the runtime into one module beside short scripts.
"""

from __future__ import annotations

import ast
import builtins
import re
import sys

import pytest

from detachlint.registry import load_rules
from detachlint.verify import PROBED
from detachlint.verify.repro import RUNTIME_MODULE, bound_names, global_reads, runtime_library, script
from detachlint.verify.runtime import probe_files, probe_folder

from conftest import ROOT

RULES = load_rules()
RUNTIME = ROOT / "detachlint" / "verify" / "runtime"


def _verification_docs(rule) -> str:
    match = re.search(r"^## Verification\n(.*?)(?=^## |\Z)", rule.docs(), flags=re.M | re.S)
    assert match is not None, f"{rule.code} has no `## Verification` section"
    return " ".join(match.group(1).split())


def test_probed_rules_are_the_probe_modules_that_exist():
    files = sorted(p.stem for p in (ROOT / "rules" / "probes").glob("dl*.py"))
    assert probe_folder() == ROOT / "rules" / "probes"
    assert sorted(PROBED) == sorted(code.upper() for code in files) == sorted(probe_files())
    assert PROBED <= set(RULES), f"probes for rules that do not exist: {sorted(PROBED - set(RULES))}"
    for code, path in probe_files().items():
        names = {name for node in ast.parse(path.read_text()).body for name in bound_names(node)}
        assert "probe" in names, f"{path.name} defines no `probe(spec, budget)`"


def test_the_worker_loads_the_same_probes():
    pytest.importorskip("torch")
    from detachlint.verify.runtime.verdict import PROBES

    assert set(PROBES) == PROBED
    assert all(callable(probe) for probe in PROBES.values())


@pytest.mark.parametrize("code", sorted(RULES))
def test_a_rule_has_a_probe_iff_its_docs_describe_one(code):
    docs = _verification_docs(RULES[code])
    if code in PROBED:
        assert "No probe" not in docs and docs.startswith("The probe"), f"{code} has a probe its docs do not describe: {docs}"
    else:
        # Plainly none, then why (or how running the code would show it).
        match = re.match(r"No probe( runs for this rule)?( yet)?[:.] (\S.*)", docs)
        assert match is not None, f"{code} has no probe, and its docs should start by saying so: {docs}"
        assert len(match.group(3).split()) >= 5, f"{code}'s docs say it has no probe but not why: {docs}"


def _imports(path):
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield "." * node.level + (node.module or "")


@pytest.mark.skipif(sys.version_info < (3, 10), reason="sys.stdlib_module_names is new in 3.10")
def test_runtime_and_probes_import_only_the_standard_library_torch_and_the_runtime():
    paths = sorted(RUNTIME.glob("*.py")) + sorted((ROOT / "rules" / "probes").glob("*.py"))
    for path in paths:
        for name in _imports(path):
            top = name.split(".")[0]
            allowed = top in sys.stdlib_module_names or top in ("torch", "numpy") or name.startswith("detachlint.verify.runtime")
            assert allowed, f"{path.relative_to(ROOT)} imports {name}"


def _unbound_reads(tree) -> set:
    bound = {name for node in tree.body for name in bound_names(node)}
    missing = set()
    for node in tree.body:
        missing |= global_reads(node) - bound - set(dir(builtins)) - {"__file__", "__name__"}
    return missing


def test_the_emitted_runtime_defines_every_name_it_reads():
    """The closure `--emit-repro` takes over the runtime leaves nothing out:
    every name a top-level statement of `repro_runtime.py` reads is bound
    at its top or a builtin, and it imports nothing from detachlint."""
    tree = ast.parse(runtime_library())
    assert not _unbound_reads(tree)
    assert not [name for name in _imports_of(tree) if name.startswith("detachlint")]


@pytest.mark.parametrize("code", sorted(PROBED))
def test_an_emitted_script_defines_or_imports_every_name_it_reads(code):
    """A script binds, or imports from the runtime module, every name its
    probe and `main` read, and the runtime defines each name imported."""
    text = script({"code": code, "path": "train.py", "line": 3, "column": 0, "message": "m", "blocks": []})
    tree = ast.parse(text)
    assert not _unbound_reads(tree), f"the {code} script reads {sorted(_unbound_reads(tree))} without defining them"
    defined = {name for node in ast.parse(runtime_library()).body for name in bound_names(node)}
    imported = [a.name for node in tree.body if isinstance(node, ast.ImportFrom) and node.module == RUNTIME_MODULE for a in node.names]
    assert set(imported) <= defined and {"run_probe", "verdict_line"} <= set(imported)
    # Only the sandbox, whose import may fail (test_emitted_scripts.py holds the guard).
    assert [name for name in _imports_of(tree) if name.startswith("detachlint")] == ["detachlint.verify.sandbox"]


def _imports_of(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.module or ""


def test_the_readme_names_the_rules_without_a_probe():
    text = " ".join((ROOT / "README.md").read_text().split())
    match = re.search(r"Every rule has a probe \(.*?\) except (.*?), whose", text)
    assert match is not None
    unprobed = set(load_rules()) - set(PROBED)
    assert sorted(re.findall(r"DL\d{3}", match.group(1))) == sorted(unprobed)


def test_each_runtime_module_builds_only_on_the_ones_before_it():
    """The order `--emit-repro` writes the runtime in: a definition's module-level
    needs (a base class, a decorator, a default) are always met above it."""
    from detachlint.verify.repro import RUNTIME_MODULES

    assert sorted(RUNTIME_MODULES) == sorted(p.stem for p in RUNTIME.glob("*.py") if p.stem != "__init__")
    for index, name in enumerate(RUNTIME_MODULES):
        for imported in _imports(RUNTIME / f"{name}.py"):
            if imported.startswith("detachlint.verify.runtime."):
                assert imported.rsplit(".", 1)[1] in RUNTIME_MODULES[:index], f"{name}.py imports {imported}"
