"""`--emit-repro`: each reproduction as a short script, beside one runtime module.

A script holds, in this order: the reproduction's spec (the user's code in
it as readable blocks), the rule's probe module and a `main`; its docstring
says on which line each starts. What the probe needs from the verifier's
runtime it imports from `repro_runtime.py`, written once into the same
folder: the closure, over `runtime/`'s modules, of the top-level names any
probe reads (found with `ast`), in the modules' order, so that each script
stays short enough to read. Scripts and runtime import only the standard
library and torch; `python script.py` rebuilds and runs the reproduction in
a temporary folder and prints the same verdict line the report shows. It
runs the user's code unconfined, and says so at its top.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Set, Tuple

from detachlint import __version__
from detachlint.verify.runtime import probe_files

RUNTIME = Path(__file__).with_name("runtime")
# The module, written beside the scripts, that holds the runtime they import.
RUNTIME_MODULE = "repro_runtime"
# The runtime's modules, each using only the ones before it: emitted in this
# order, their definitions exist before any module-level statement needs them.
RUNTIME_MODULES = ("standins", "environments", "synthesis", "observe", "user_code", "shared_probes", "variable_probe", "verdict")
# What `main` below calls.
_MAIN_USES = {"run_probe", "verdict_line", "torch"}


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def bound_names(statement: ast.stmt) -> List[str]:
    """The module-level names a top-level statement binds."""
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [statement.name]
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in statement.names]
    targets = []
    if isinstance(statement, ast.Assign):
        targets = statement.targets
    elif isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
        targets = [statement.target]
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _locals(scope) -> Set[str]:
    """Names bound inside a function or lambda (its own scope, not nested ones)."""
    args = scope.args
    names = {a.arg for a in args.posonlyargs + args.args + args.kwonlyargs}
    names |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
    declared_global: Set[str] = set()
    todo = list(scope.body) if isinstance(scope.body, list) else [scope.body]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue  # its body is its own scope
        if isinstance(node, (ast.Lambda,) + _COMPREHENSIONS):
            continue
        if isinstance(node, ast.Global):
            declared_global.update(node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        todo.extend(ast.iter_child_nodes(node))
    return names - declared_global


def global_reads(statement: ast.AST) -> Set[str]:
    """Names a top-level statement reads from module scope, whenever it runs."""
    found: Set[str] = set()

    def visit(node, scopes):
        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Store) and not any(node.id in s for s in scopes):
                found.add(node.id)
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            # Decorators, defaults and annotations run in the enclosing scope.
            outer = list(getattr(node, "decorator_list", [])) + node.args.defaults
            outer += [d for d in node.args.kw_defaults if d is not None]
            for arg in node.args.posonlyargs + node.args.args + node.args.kwonlyargs + [node.args.vararg, node.args.kwarg]:
                if arg is not None and arg.annotation is not None:
                    outer.append(arg.annotation)
            if getattr(node, "returns", None) is not None:
                outer.append(node.returns)
            for child in outer:
                visit(child, scopes)
            inner = scopes + [_locals(node)]
            for child in node.body if isinstance(node.body, list) else [node.body]:
                visit(child, inner)
            return
        if isinstance(node, _COMPREHENSIONS):
            targets = {n.id for g in node.generators for n in ast.walk(g.target) if isinstance(n, ast.Name)}
            for child in ast.iter_child_nodes(node):
                visit(child, scopes + [targets])
            return
        # A class body reads the enclosing scope like any block (its own
        # names are over-counted, which only ever adds a definition).
        for child in ast.iter_child_nodes(node):
            visit(child, scopes)

    visit(statement, [])
    return found


@dataclass
class _Definition:
    names: List[str]  # the module-level names it binds
    reads: Set[str]  # the module-level names it reads
    text: str  # its source, with the comment right above it


@dataclass
class _Module:
    doc: str
    definitions: List[_Definition]
    imports: Dict[str, str]  # name -> the import statement that binds it (standard library, torch)
    aliases: Dict[str, str]  # local name -> runtime name, from `from detachlint... import x as y`


def _is_runtime_import(node: ast.stmt) -> bool:
    return isinstance(node, ast.ImportFrom) and (node.level > 0 or (node.module or "").startswith("detachlint"))


@functools.lru_cache(maxsize=None)
def _module(path: Path) -> _Module:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    tree = ast.parse(text)
    doc = ast.get_docstring(tree) or ""
    definitions, imports, aliases = [], {}, {}
    for node in tree.body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue
        if _is_runtime_import(node):
            aliases.update({a.asname: a.name for a in node.names if a.asname and a.asname != a.name})
            continue
        source = ast.get_source_segment(text, node, padded=True)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for name in bound_names(node):
                imports[name] = source.strip()
            continue
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        above = start - 1
        while above > 0 and lines[above - 1].lstrip().startswith("#"):
            above -= 1
        source = "".join(lines[above : node.end_lineno]).rstrip() + "\n"
        if not bound_names(node):
            # A statement that binds no name (`TABLE.update(...)`) would be left
            # out of every script, which would then run other code than the worker.
            raise RuntimeError(f"{path.name}:{node.lineno}: a module-level statement of the runtime that binds no name")
        definitions.append(_Definition(bound_names(node), global_reads(node), source))
    return _Module(doc, definitions, imports, aliases)


def _runtime() -> List[Tuple[str, _Module]]:
    return [(name, _module(RUNTIME / f"{name}.py")) for name in RUNTIME_MODULES]


def _owners() -> Dict[str, _Definition]:
    """Runtime name -> the definition that binds it."""
    return {bound: d for _, module in _runtime() for d in module.definitions for bound in d.names}


def _closure(names: Set[str]) -> Set[int]:
    """The ids of the runtime definitions `names` need, transitively."""
    owner, todo, chosen = _owners(), set(names), set()
    while todo:
        definition = owner.get(todo.pop())
        if definition is not None and id(definition) not in chosen:
            chosen.add(id(definition))
            todo |= definition.reads
    return chosen


def _probe_reads(probe: _Module) -> Set[str]:
    """What the probe module and `main` read from outside the probe."""
    reads = set(_MAIN_USES) | set(probe.aliases.values())
    for definition in probe.definitions:
        reads |= definition.reads
    return reads


def _joined(definitions: List[_Definition]) -> str:
    """Definitions two blank lines apart, runs of one-line constants kept together."""
    out = ""
    for previous, definition in zip([None] + definitions, definitions):
        if previous is not None:
            short = "\n" not in previous.text.rstrip("\n") and "\n" not in definition.text.rstrip("\n")
            out += "" if short else "\n\n"
        out += definition.text
    return out


def _section(where: str, module: _Module, chosen: List[_Definition]) -> str:
    summary = module.doc.strip().splitlines()[0] if module.doc.strip() else ""
    return f"# {'-' * 75}\n# From {where}: {summary}\n\n" + _joined(chosen).rstrip() + "\n"


def _import_block(statements: List[str]) -> str:
    """Standard library imports, then torch's and numpy's, each group sorted."""

    def standard(statement: str) -> bool:
        return statement.split()[1].split(".")[0] in sys.stdlib_module_names

    first = sorted(s for s in statements if standard(s))
    second = sorted((s for s in statements if not standard(s)), key=lambda s: (s.startswith("from"), s))
    return "\n".join(first) + "\n\n" + "\n".join(second) + "\n"


def _imports_read(module: _Module, definitions: List[_Definition], into: List[str]) -> None:
    for definition in definitions:
        for read in sorted(definition.reads):
            statement = module.imports.get(read)
            if statement is not None and statement not in into:
                into.append(statement)


@functools.lru_cache(maxsize=None)
def runtime_library() -> str:
    """The text of `repro_runtime.py`, the module every emitted script
    imports: the runtime definitions any rule's probe needs, in the
    runtime modules' order, with the imports they read."""
    needed: Set[str] = set()
    for path in probe_files().values():
        needed |= _probe_reads(_module(path))
    chosen = _closure(needed)
    sections, statements = [], []
    for name, module in _runtime():
        definitions = [d for d in module.definitions if id(d) in chosen]
        if definitions:
            sections.append(_section(f"detachlint/verify/runtime/{name}.py", module, definitions))
            _imports_read(module, definitions, statements)
    body = "\n\n".join(sections)
    runtime_id = hashlib.sha256(body.encode()).hexdigest()[:16]
    doc = (
        f'r"""detachlint {__version__}: the verifier runtime the reproduction scripts beside this file import.\n\n'
        + _wrap(
            "Written by `detachlint check --emit-repro DIR`: stand-ins for what a reproduction cannot have, "
            "input synthesis, loading and running the user's code, observing it, and the verdict line. It is "
            "the worker's runtime, copied; it needs Python and torch only. Each script checks RUNTIME_ID, so a "
            "script and a runtime written by different detachlint versions refuse to run together."
        )
        + '\n"""\n\n'
    )
    return doc + _import_block(statements) + f"\nRUNTIME_ID = {runtime_id!r}\n\n\n" + body


def runtime_id() -> str:
    return re.search(r"^RUNTIME_ID = '(\w+)'$", runtime_library(), re.M).group(1)


def _pieces(code: str) -> Tuple[str, str]:
    """(the imports of the script of rule `code`, its probe module)."""
    path = probe_files()[code]
    probe = _module(path)
    owner = _owners()
    statements: List[str] = []
    _imports_read(probe, probe.definitions, statements)
    for needed in ("import os", "import sys", "import torch"):  # for the runtime's import and main
        if needed not in statements:
            statements.append(needed)
    from_runtime = sorted(n for n in _probe_reads(probe) if n in owner)
    twice = sorted(n for d in probe.definitions for n in d.names if n in from_runtime)
    if twice:
        raise RuntimeError(f"the probe of {code} and the runtime both define {', '.join(twice)}")
    names = [n for n in from_runtime if n not in probe.aliases.values()]
    names += [f"{name} as {local}" for local, name in sorted(probe.aliases.items())]
    runtime_import = (
        "# The runtime, written beside this script by `--emit-repro`.\n"
        "HERE = os.path.dirname(os.path.abspath(__file__))\n"
        f"if not os.path.isfile(os.path.join(HERE, {RUNTIME_MODULE + '.py'!r})):\n"
        f'    raise SystemExit("{RUNTIME_MODULE}.py is missing: it is written beside this script by '
        '`detachlint check --emit-repro DIR`")\n'
        "sys.path.insert(0, HERE)\n"
        f"import {RUNTIME_MODULE}  # noqa: E402\n\n"
        f"if {RUNTIME_MODULE}.RUNTIME_ID != {runtime_id()!r}:\n"
        f'    raise SystemExit("{RUNTIME_MODULE}.py beside this script was written by another detachlint: '
        'emit the reproductions again")\n'
        f"from {RUNTIME_MODULE} import (  # noqa: E402\n"
        + "".join(f"    {n},\n" for n in names)
        + ")\n"
    )
    where = f"rules/{path.parent.name}/{path.name}, beside the rule"
    probe_part = _section(where, probe, probe.definitions)
    return _import_block(statements) + "\n" + runtime_import, probe_part


def _string(text: str) -> str:
    """A readable literal: a raw triple-quoted string when that is exact, else repr."""
    if "'''" not in text and not text.endswith("\\") and "\r" not in text:
        return "r'''" + text + "'''"
    return repr(text)


def _value(value, indent: str = "") -> str:
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = indent + "    "
        items = [f"{inner}{_value(k)}: {_value(v, inner)}," for k, v in value.items()]
        return "{\n" + "\n".join(items) + f"\n{indent}}}"
    if isinstance(value, list):
        if not value:
            return "[]"
        inner = indent + "    "
        return "[\n" + "\n".join(f"{inner}{_value(v, inner)}," for v in value) + f"\n{indent}]"
    if isinstance(value, str) and "\n" in value:
        return _string(value)
    return repr(value)


def script(spec: dict) -> str:
    """The text of the reproduction script for one spec: the user's code
    (SPEC) first, then the probe and `main`, with a map of where each
    starts; the runtime is imported from `repro_runtime.py` beside it."""
    imports, probe = _pieces(spec["code"])
    rule = spec["code"]
    where = f"{spec['path']}:{spec['line']}:{spec['column']}"
    spec_part = (
        f"# {'-' * 75}\n"
        "# The reproduction: the user's code as blocks (with their line numbers in\n"
        "# the original file), the finding, and hints for building inputs.\n\n"
        "SPEC = " + _value(spec) + "\n"
    )
    main = (
        "def main():\n"
        '    """Run the probe on SPEC in a temporary folder; print the verdict line."""\n'
        "    import tempfile\n\n"
        "    if not os.environ.get('DETACHLINT_SANDBOXED') and os.environ.get('DETACHLINT_UNCONFINED') != '1':\n"
        "        try:\n"
        "            from detachlint.verify.sandbox import rerun_confined\n"
        "        except ImportError:\n"
        "            print('detachlint is not installed: running UNCONFINED', file=sys.stderr)\n"
        "        else:\n"
        "            return rerun_confined(__file__, (SPEC.get('project') or {}).get('paths', []))\n"
        "    torch.set_num_threads(1)\n"
        "    home = os.getcwd()\n"
        "    with tempfile.TemporaryDirectory() as scratch:\n"
        "        os.chdir(scratch)\n"
        "        try:\n"
        "            result = run_probe(probe, SPEC)\n"
        "        finally:\n"
        "            os.chdir(home)\n"
        "    print(verdict_line(result))\n"
        "    return {'confirmed': 1, 'refuted': 0}.get(result['status'], 2)\n\n\n"
        'if __name__ == "__main__":\n'
        "    raise SystemExit(main())\n"
    )
    pieces = [imports, spec_part, probe, main]

    def header(starts):
        return (
            "#!/usr/bin/env python3\n"
            f'r"""detachlint {__version__}: reproduction of {rule} at {where}.\n\n'
            f"{_wrap(spec['message'])}\n\n"
            + _wrap(
                f"What this is: a script that rebuilds the code in SPEC['blocks'] (copied from "
                f"{spec['path']}, with their line numbers), runs it on synthesized inputs in a temporary folder "
                "and prints the verdict line `detachlint check --verify` reports: status (basis): evidence. "
                f"It needs Python, torch and {RUNTIME_MODULE}.py, the verifier's runtime that --emit-repro "
                "writes beside it (keep the two together); it does not import detachlint. Nothing else from "
                "the original file runs."
            )
            + "\n\n"
            + _wrap(
                "Where detachlint is installed, the script runs itself again in the verifier's sandbox (no "
                "network, no environment, nothing writable outside a private /tmp, hard limits); with "
                "DETACHLINT_UNCONFINED=1, or where detachlint is not installed, it runs that code UNCONFINED: "
                "with your permissions, no time or memory limit, free to write files, start processes and "
                "reach the network. Read SPEC['blocks'] before you run it."
            )
            + "\n\n"
            "Where to read:\n"
            f"  line {starts[1]}: SPEC, the user's code and the finding\n"
            f"  line {starts[2]}: the {rule} probe\n"
            f"  line {starts[3]}: main()\n"
            f"  {RUNTIME_MODULE}.py: stand-ins, input synthesis, running the user's code\n"
            "Exit status: 1 confirmed, 0 refuted, 2 otherwise (plausible, inconclusive).\n"
            '"""\n\n'
        )

    def starts(first):
        lines, found = first, []
        for piece in pieces:
            found.append(lines)
            lines += piece.rstrip("\n").count("\n") + 3  # each piece is followed by two blank lines
        return found

    first = header([0, 0, 0, 0]).count("\n") + 1
    return header(starts(first)) + "\n\n".join(piece.rstrip("\n") + "\n" for piece in pieces)


def write_runtime(folder: Path) -> None:
    """Write `repro_runtime.py` into `folder`, whole or not at all."""
    target = folder / f"{RUNTIME_MODULE}.py"
    partial = folder / f".{RUNTIME_MODULE}.py.partial"
    partial.write_text(runtime_library(), encoding="utf-8")
    os.replace(partial, target)


def _wrap(text: str, width: int = 76) -> str:
    words, lines, line = text.replace('"""', "'''").split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return "\n".join(lines)


def file_name(spec: dict, taken: List[str]) -> str:
    """`pos_bce_prob_clamp_L30_DL101.py`, unique within one run."""
    stem = re.sub(r"[^A-Za-z0-9_]+", "_", Path(spec["path"]).stem).strip("_") or "stdin"
    name = f"{stem}_L{spec['line']}_{spec['code']}.py"
    count = 2
    while name in taken:
        name = f"{stem}_L{spec['line']}_{spec['code']}_{count}.py"
        count += 1
    taken.append(name)
    return name
