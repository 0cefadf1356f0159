"""A finding's reproduction, cut from the user's file with `ast`.

The spec carries the file's own code as blocks with their original line
numbers: the import statements, the enclosing function or class, and the
module-level definitions those use, transitively. The file's top-level
script code (training loops, argparse, `if __name__ == "__main__":`) is part
of it only for a finding in script code (`_script_slice`): the statement
holding the finding and those it depends on, rewritten to run a few
iterations on synthesized batches and to reach no file or network. A
module-level assignment is carried only when it is a plain definition (a
constant, a logger, a named tuple), never when it loads,
downloads or builds something. Hints found elsewhere in the file go along:
constructor calls with literal arguments, which class a variable holds, the
sizes an input may need.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from typing import Dict, Iterable, List, Optional, Set

from detachlint.finding import Finding

# Calls a module-level assignment may make and still count as a definition.
_DEFINITION_CALLS = {
    "getLogger", "get_logger", "namedtuple", "NamedTuple", "TypeVar", "dict", "list", "tuple", "set",
    "frozenset", "defaultdict", "OrderedDict", "partial", "compile", "device", "dtype", "field",
    "is_available", "Enum", "IntEnum", "getenv", "get", "object", "float", "int", "str", "bool",
    "Path", "range", "zip", "sqrt", "log", "exp", "pow", "finfo", "iinfo", "version", "parse", "make_dataclass",
    "ModuleType", "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Identity", "property", "staticmethod",
    # `evaluate = torch.no_grad()(evaluate)`: a decorator applied after the fact (not
    # `set_grad_enabled`, whose call alone switches the mode).
    "no_grad", "enable_grad", "inference_mode",
}
_SIZE_WORDS = ("size", "board", "img", "image", "res", "resolution", "patch", "height", "width", "side", "length", "len")
_CHAINED = {"to", "cuda", "cpu", "eval", "train", "double", "float", "half", "requires_grad_"}


def build_spec(finding: Finding, source: str) -> dict:
    """The JSON-ready reproduction of one finding (with `reason` set when none can be built)."""
    spec = {
        "code": finding.code,
        "path": finding.path,
        "line": finding.line,
        "end_line": finding.end_line,
        "column": finding.column,
        "message": finding.message,
        "blocks": [],
        "target": {"kind": "module"},
        "hints": {},
        "unavailable": {},
    }
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as error:
        spec["reason"] = f"the file does not parse: {error}"
        return spec
    lines = source.splitlines(keepends=True)
    index = _Index(tree)
    _mark_environments(tree, index, lines)
    # A step function called in a loop elsewhere: the loop is what repeats it,
    # so the reproduction runs the code holding that loop.
    line = _calling_loop(tree, finding) or _later_use(tree, finding) or _lambda_caller(tree, index, finding) or finding.line
    top = _enclosing(tree.body, line)
    needed: List[ast.stmt] = []
    if isinstance(top, ast.ClassDef):
        method = _enclosing(top.body, line)
        if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            spec["target"] = {"kind": "method", "class": top.name, "function": method.name}
        else:
            spec["target"] = {"kind": "module", "class": top.name}
        needed.append(top)
    elif isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)):
        spec["target"] = {"kind": "function", "function": top.name}
        needed.append(top)
    script = _script_slice(tree, index, line, lines) if spec["target"]["kind"] == "module" and top is not None else None
    if script is not None and script.get("reason"):
        spec["reason"] = script["reason"]
    elif script is not None:
        # Script code: the statements it needs run as one function, rewritten to run briefly and confined.
        spec["target"] = {"kind": "function", "function": SCRIPT_FUNCTION, "script": True}
        definitions = script["definitions"]
        if line != finding.line:
            # The step function the loop calls, with what it uses.
            definitions = definitions + [s for s in [_enclosing(tree.body, finding.line)] if isinstance(s, _DEFINITIONS)]
        chosen = index.closure(definitions)
        spec["blocks"] = [_block(statement, lines) for statement in chosen]
        spec["blocks"] += [
            {"line": _start(statement), "text": text, "script": True}
            for statement, text in zip(script["statements"], script["texts"])
        ]
        bound = set().union(*(_bound(s) for s in script["statements"]))
        spec["unavailable"] = {name: reason for name, reason in index.unavailable.items() if name not in bound}
        if script["argv"]:
            spec["script"] = {"argv": True}
        holder = next((s for s in script["statements"] if _start(s) <= finding.line <= (s.end_lineno or s.lineno)), None)
        if holder is not None:
            # Columns in the rewritten text, which has the `__main__` block's indentation off.
            spec["column"] -= holder.col_offset
    elif spec["target"]["kind"] != "module":
        models = _model_classes(tree, index)
        owner_is_module = isinstance(top, ast.ClassDef) and top.name in models
        if not owner_is_module:
            # A function or a plain class (a trainer) takes its model as an
            # argument: the file's own model classes are the candidates.
            needed.extend(index.classes[name] for name in _roots(models, index)[-3:])
        else:
            # A layer's member (`self._codebook`) may exist only as the outer
            # model builds the layer: the models that build it go along.
            needed.extend(index.classes[name] for name in _builders(top.name, models, index)[-3:])
        if line != finding.line:
            needed.extend(s for s in [_enclosing(tree.body, finding.line)] if isinstance(s, _DEFINITIONS))
        spec["hints"] = _hints(tree, index, top, spec["target"], models)
        sites, site_definitions = _ctor_sites(tree, index, lines)
        if sites:
            # How the program builds the file's classes whose arguments are not literals.
            spec["hints"]["ctor_sites"] = sites
            needed.extend(site_definitions)
        # The file's classes and functions its own calls pass in (`MoCo(mlp_encoder)`).
        needed.extend(_hinted_definitions(spec["hints"], index))
        # Its settings classes (`class Config: lr = 1e-3`): what a `cfg` argument may be.
        needed.extend(node for node in index.classes.values() if _settings_class(node) and node not in needed)
        chosen = index.closure(needed, values=True)
        spec["blocks"] = [_block(statement, lines) for statement in chosen]
        spec["unavailable"] = index.unavailable
    if spec["target"]["kind"] in ("function", "method") and not spec["target"].get("script"):
        sites = _call_sites(tree, index, spec["target"])
        if sites:
            # The file's own call of the target, with the statements that build its arguments.
            site = sites[0]
            spec["call_site"] = _site_entry(site)
            for other in sites[:_ALTERNATIVE_SITES + 1]:
                _add_definitions(spec, index, other["definitions"], lines)
            spec["blocks"] += [dict(_block(statement, lines), call_site=True) for statement in site["statements"]]
            if len(sites) > 1:
                # The file's next calls, for a run when this one does not reach the
                # finding's line (`train(ok_model)` before `train(buggy_model)`).
                spec["call_site"]["alternatives"] = [
                    dict(_site_entry(other), blocks=[dict(_block(s, lines), call_site=True) for s in other["statements"]])
                    for other in sites[1:_ALTERNATIVE_SITES + 1]
                ]
    if spec["target"]["kind"] in ("function", "method") and not spec["target"].get("script"):
        entries = _call_sites(tree, index, spec["target"], program=True)[:_ALTERNATIVE_SITES]
        if entries:
            # The program run whole: when no call and no synthesized input reaches the line.
            spec["program_calls"] = [
                dict(_site_entry(entry), blocks=[dict(_block(s, lines), call_site=True) for s in entry["statements"]])
                for entry in entries
            ]
            for entry in entries:
                _add_definitions(spec, index, entry["definitions"], lines)
    if spec["target"]["kind"] in ("function", "method") and not spec["target"].get("script"):
        # Its own index: what the script binds is not "unavailable" to the other runs.
        script_index = _Index(tree)
        _mark_environments(tree, script_index, lines)
        entry = _script_entry(tree, script_index, spec["target"], lines)
        if entry is not None:
            # The file run as a script (its `__main__` block's training loop),
            # after the argument-less entries: what `python file.py` runs.
            spec["program_calls"] = spec.get("program_calls", []) + [entry]
            _add_definitions(spec, script_index, entry.pop("definitions"), lines)
    switch = _script_grad_off(tree)
    if switch is not None:
        spec["hints"]["script_grad_off"] = switch
        if _grad_off_on_import(tree, switch):
            spec["hints"]["grad_off_on_import"] = True
    if index.data_globals and spec["target"]["kind"] != "module":
        spec["hints"]["data_globals"] = sorted(index.data_globals)
    spec["hints"]["call"] = _call_text(tree, finding)
    called = (finding.details or {}).get("called_with_grad_off")
    if isinstance(called, str):
        # The function runs with autograd off because of where it is called
        # (`on line 19`, `in train.py (line 40)`): the reproduction runs it so.
        spec["hints"]["called_with_grad_off"] = called
    if not index.stars:
        spec["hints"]["no_star_imports"] = True  # a name nothing binds comes from nowhere
    spec["hints"]["statement"] = _statement_text(tree, finding.line)
    loss = _loss_spec(finding, source, tree, lines)
    if loss is not None:
        spec["loss_spec"] = loss
    return spec


def _loss_spec(finding: Finding, source: str, tree: ast.Module, lines: List[str]) -> Optional[dict]:
    """For a dead loss term (DL201) backpropagated outside the code that holds
    the cut, or inference tensors handed to training code elsewhere (DL303):
    the reproduction of the code that backpropagates the loss (its blocks,
    target, call site), with the code computing the term, for the probe to run."""
    details = finding.details or {}
    line = details.get("loss_line") if finding.code == "DL201" else None
    trains = re.search(r"to code that trains \(`[^`]*`, line (\d+)\)", finding.message) if finding.code == "DL303" else None
    if trains is not None:
        # Inference tensors handed to training code elsewhere: run that code.
        line = int(trains.group(1))
    if not line or _enclosing(tree.body, line) is _enclosing(tree.body, finding.line):
        return None
    other = build_spec(dataclasses.replace(finding, line=line, end_line=line, details=None), source)
    if other.get("reason") or other["target"]["kind"] == "module":
        return None
    term = _enclosing(tree.body, details.get("term_line") or 0)
    if isinstance(term, _DEFINITIONS) and not any(b["line"] == _start(term) for b in other["blocks"]):
        # The loss class or helper computing the term, when no call site brought it.
        other["blocks"] = [_block(s, lines) for s in _Index(tree).closure([term], values=True) if not any(b["line"] == _start(s) for b in other["blocks"])] + other["blocks"]
    return {k: other[k] for k in ("line", "end_line", "blocks", "target", "hints", "unavailable", "call_site", "program_calls", "script") if k in other}


SCRIPT_FUNCTION = "__detachlint_script__"
# Modules a script statement may call into; their loaders, savers and hubs excluded.
_SCRIPT_MODULES = {"torch", "numpy", "math", "copy", "types"}
_SCRIPT_BUILTINS = {
    "print", "len", "range", "float", "int", "bool", "list", "tuple", "dict", "sum", "min", "max", "abs",
    "round", "zip", "enumerate", "isinstance", "sorted", "reversed", "all", "any", "set", "frozenset", "str",
    "chr", "ord", "map", "filter", "iter", "next",
}
# Calls that reach files, the network or other programs, by name.
_SCRIPT_UNSAFE = {"load", "save", "open", "urlopen", "system", "popen", "compile", "exec", "eval", "hub"}
_SCRIPT_UNSAFE_PREFIXES = ("load_", "save_", "download", "from_pretrained", "fetch")
_SCRIPT_LIMIT = 40
_DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _script_slice(tree: ast.Module, index: "_Index", line: int, lines: List[str]) -> Optional[dict]:
    """For a finding in top-level script code or in the `__main__` block: the
    statement holding it (a whole loop, when it is in one), the earlier
    statements it depends on (what builds the model, the optimizer, the data,
    and what changes them: `model.eval()`, a training loop before an
    evaluation loop), and the later straight-line ones that use its values.
    Their text is rewritten so the script runs confined and briefly (see
    `_ScriptRewrite`). None when there is no such statement or too many."""
    units = _script_units(tree)
    top = next((u for u in units if _start(u) <= line <= (u.end_lineno or u.lineno)), None)
    if top is None or isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return None
    position = units.index(top)
    before = units[:position]
    iterated = set().union(*(_iterated_names(u) for u in units))
    data: Dict[int, List[str]] = {}
    # Names script statements bind (not imports or definitions): what a
    # statement that mutates (`model.eval()`) must touch to matter.
    variables = set().union(*(_bound(u) for u in units if not (u in tree.body and _defines_only(u))))
    wanted = _free_names([top])
    chosen: Dict[int, ast.stmt] = {}
    for _ in range(4):
        # Functions of the file the chosen code calls read script variables too.
        chosen, data = {id(top): top}, {}
        grown = set(wanted)
        for statement in reversed(before):
            if statement in tree.body and _defines_only(statement):
                continue
            if not _bound(statement) & grown and not _changes(statement, grown & variables, index):
                continue
            chosen[id(statement)] = statement
            if _data_source(statement, iterated, index, before):
                # In the targets' order: `train, test = ...` unpacks them so.
                data[id(statement)] = list(dict.fromkeys(n.id for t in statement.targets for n in ast.walk(t) if isinstance(n, ast.Name)))
                continue  # synthesized: what it was built from is not needed
            grown |= _free_names([statement])
        used = set().union(*(_globals_read(index, name, variables) for name in grown))
        if used <= wanted:
            break
        wanted |= used
    values = set().union(*(_bound(s) for s in chosen.values()))
    known = values | {n for n, bs in index.binders.items() if all(_is_definition(b) for b in bs)} | _SCRIPT_BUILTINS
    for statement in units[position + 1 :]:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or not _loaded_names(statement) & values:
            continue
        inner = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        inner |= {h.name for h in getattr(statement, "handlers", ()) if h.name} | _BUILTIN_EXCEPTIONS
        if not _straight_block(statement, index) or not _loaded_names(statement) - inner <= known:
            break
        chosen[id(statement)] = statement
        values |= _bound(statement)
        known |= _bound(statement)
    statements = sorted(chosen.values(), key=lambda s: s.lineno)
    if len(statements) > _SCRIPT_UNITS or sum(s.end_lineno - _start(s) + 1 for s in statements) > _SCRIPT_LINES:
        return None
    bound_here = set().union(*(_bound(s) for s in statements))
    needed = (set().union(*(_loaded_names(s) for s in statements)) | wanted) - bound_here
    definitions = [b for name in sorted(needed) for b in index.binders.get(name, []) if _is_definition(b)]
    if any(name not in index.binders and name not in _BUILTIN_NAMES for name in needed):
        definitions += index.stars  # where a name nothing binds comes from
    for statement in statements:
        value = getattr(statement, "value", None)
        if statement is not top and id(statement) not in data and isinstance(statement, ast.Assign) and isinstance(value, ast.Call) and _io_call(value, index):
            # A value read from disk (weights, a tensor): its content is the program's, unknown here.
            names = ", ".join(f"`{n}`" for n in sorted(_bound(statement)))
            return {"reason": (
                f"the code needs {names}, which top-level script code gets from `{ast.unparse(value.func)}` "
                f"(line {statement.lineno}), a call that reaches files, the network or other programs: the verifier does not make it"
            )}
    rewrite = _ScriptRewrite(index, line, lines, data)
    texts = [rewrite.text(statement) for statement in statements]
    return {"statements": statements, "texts": texts, "definitions": definitions, "argv": rewrite.argv, "indent": top.col_offset}


def _defines_only(statement: ast.stmt) -> bool:
    """An import, a function or a class, or imports guarded by a handler that only reports their failure."""
    return isinstance(statement, _DEFINITIONS) or _guarded_imports(statement)


def _guarded_imports(statement: ast.stmt) -> bool:
    """`try: <imports> except ImportError: <report, raise>`: the worker runs
    its imports one by one (the block's `imports` flag), so one that fails
    leaves only its own names missing."""
    return isinstance(statement, ast.Try) and bool(statement.handlers) and all(
        _import_failure_handler(h, statement) for h in statement.handlers
    ) and not statement.orelse and not statement.finalbody


# More script code than this is not run: a slice that big is a whole program
# (statements: an argument parser takes one per option).
_SCRIPT_UNITS, _SCRIPT_LINES = 80, 600


def _script_units(tree: ast.Module) -> List[ast.stmt]:
    """The statements a script runs in order: the top level, with the body of
    `if __name__ == "__main__":` in place of the `if`."""
    units: List[ast.stmt] = []
    for statement in tree.body:
        if _is_main_guard(statement):
            units.extend(statement.body)
        else:
            units.append(statement)
    return units


def _changes(statement: ast.stmt, names: Set[str], index: "_Index") -> bool:
    """Whether a statement that binds none of `names` may change what they hold:
    a method call on one (`model.eval()`), one passed to the file's own
    function or to an in-place torch function (`nn.init.zeros_(model.bias)`),
    an assignment into one (`model.fc = ...`), a loop or block that uses one."""
    if not _loaded_names(statement) & names or _fresh_binding(statement):
        return False
    if not isinstance(statement, ast.Expr):
        return True
    call = statement.value
    if not isinstance(call, ast.Call):
        return False
    if isinstance(call.func, ast.Attribute) and _root_name(call.func.value) in names:
        return True
    passed = {_root_name(a) for a in list(call.args) + [k.value for k in call.keywords]} & names
    functions = [b for b in index.binders.get(_root_name(call.func) or "", []) if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if any(_trains(function) for function in functions):
        # A training step only moves the weights, which no probe reads, and
        # may raise on a bug of its own before the target runs.
        return False
    return bool(passed) and (bool(functions) or _call_name(call).endswith("_"))


def _trains(function: ast.AST) -> bool:
    """Whether a function calls `backward()` or an optimizer's `step()`."""
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("backward", "step")
        for node in ast.walk(function)
    )


def _fresh_binding(statement: ast.stmt) -> bool:
    """An import or an assignment to plain names: it changes no object another statement holds."""
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        return True
    if not isinstance(statement, (ast.Assign, ast.AnnAssign)):
        return False
    stored = [n for t in _targets(statement) for n in ast.walk(t) if isinstance(getattr(n, "ctx", None), ast.Store)]
    return all(isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Starred)) for n in stored)


def _targets(statement: ast.stmt) -> List[ast.expr]:
    if isinstance(statement, ast.Assign):
        return list(statement.targets)
    if isinstance(statement, (ast.AnnAssign, ast.AugAssign)):
        return [statement.target]
    return []


def _free_names(statements: List[ast.stmt]) -> Set[str]:
    """Names the statements read before they bind them (in source order; a loop
    body that reads what it binds later reads it from before the loop)."""
    free: Set[str] = set()
    bound: Set[str] = set()

    def visit(body: List[ast.stmt]) -> None:
        for statement in body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                free.update(_loaded_names(statement) - bound)
                bound.add(statement.name)
                continue
            header = _own_expressions(statement)
            for expression in header:
                free.update(_loaded_names(expression) - bound)
            if isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
                free.update({statement.target.id} - bound)  # `total += x` reads `total`
            if isinstance(statement, _COMPOUND) or isinstance(statement, ast.Try):
                bound.update(_header_bound(statement))
                for handler in getattr(statement, "handlers", []):
                    if handler.name:
                        bound.add(handler.name)
                for field in ("body", "handlers", "orelse", "finalbody"):
                    for part in getattr(statement, field, []):
                        visit(part.body if isinstance(part, ast.ExceptHandler) else [part])
            else:
                bound.update(_bound(statement))

    visit(statements)
    return free


def _own_expressions(statement: ast.stmt) -> List[ast.expr]:
    """The expressions a statement evaluates itself (a loop's iterable, an `if`'s
    test), not those of the statements in its body."""
    if isinstance(statement, (ast.For, ast.AsyncFor)):
        return [statement.iter]
    if isinstance(statement, (ast.While, ast.If)):
        return [statement.test]
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return [item.context_expr for item in statement.items]
    if isinstance(statement, ast.Try):
        return [h.type for h in statement.handlers if h.type is not None]
    return [child for child in ast.iter_child_nodes(statement) if isinstance(child, ast.expr)]


def _globals_read(index: "_Index", name: str, variables: Set[str]) -> Set[str]:
    """Script variables the file's functions and classes reachable from `name` read."""
    binders = [b for b in index.binders.get(name, []) if isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    read: Set[str] = set()
    for definition in index.closure(binders) if binders else []:
        read |= _loaded_names(definition) & variables
    return read


def _iterated_names(statement: ast.stmt) -> Set[str]:
    """Names a loop iterates (`for x, y in loader`, through `enumerate`, `tqdm`,
    `zip`, `iter`) or that `next(iter(...))` reads a batch from."""
    names: Set[str] = set()
    for node in ast.walk(statement):
        sources = []
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            sources.append(node.iter)
        elif isinstance(node, ast.Call) and _call_name(node) in ("next", "iter") and node.args:
            sources.append(node.args[0])
        while sources:
            expression = sources.pop()
            if isinstance(expression, ast.Name):
                names.add(expression.id)
            elif isinstance(expression, ast.Call) and _call_name(expression) in _WRAPPERS:
                sources.extend(expression.args[:1] if _call_name(expression) != "zip" else expression.args)
    return names


# Words in the name of a value a loop iterates that say it holds batches.
_DATA_WORDS = {
    "data", "loader", "loaders", "dataset", "datasets", "batches", "batch", "train", "test", "val", "valid",
    "validation", "iter", "iterator", "samples", "ds", "dl", "trainset", "testset", "valset", "trainloader",
    "testloader", "dataloader", "minibatches", "examples",
}
_WRAPPERS = {"enumerate", "tqdm", "iter", "zip", "list", "trange", "track", "cycle"}
# Calls that build a data source (a loader, a dataset); those reading disk are synthesized.
_DATA_SUFFIXES = ("loader", "dataset", "datasets")
_DATA_NAMES = {"ImageFolder", "DatasetFolder", "random_split", "Subset", "ConcatDataset", "load_dataset"}
# Those that only wrap in-memory tensors (with no worker processes) run as written.
_IN_MEMORY_DATA = {"TensorDataset", "DataLoader", "random_split", "Subset", "ConcatDataset", "StackDataset"}


def _data_call(call: ast.Call, index: Optional["_Index"] = None) -> bool:
    name = _call_name(call)
    dotted = ast.unparse(call.func)
    own = index is not None and name in _dataset_classes(index)
    if index is not None:
        dotted = _imported_path(call.func, index) or dotted
    return own or name in _DATA_NAMES or name.lower().endswith(_DATA_SUFFIXES) or ".datasets." in f".{dotted}."


def _imported_path(func: ast.expr, index: "_Index") -> Optional[str]:
    """`torchvision.datasets.MNIST` for `dsets.MNIST` after `import
    torchvision.datasets as dsets` (or `from torchvision import datasets as
    dsets`): the dotted path the call's root name was imported as."""
    parts = []
    while isinstance(func, ast.Attribute):
        parts.insert(0, func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return None
    for binder in index.binders.get(func.id, []):
        if not isinstance(binder, (ast.Import, ast.ImportFrom)):
            continue
        for alias in binder.names:
            if alias.asname == func.id:
                module = f"{binder.module}.{alias.name}" if isinstance(binder, ast.ImportFrom) and binder.module else alias.name
                return ".".join([module] + parts)
    return None


def _dataset_classes(index: "_Index") -> Set[str]:
    """The file's own dataset classes (on `Dataset`, `IterableDataset` or one of them)."""
    found: Set[str] = set()
    changed = True
    while changed:
        changed = False
        for name, node in index.classes.items():
            if name not in found and any(b.endswith("Dataset") or b in found for b in _base_names(node)):
                found.add(name)
                changed = True
    return found


def _data_source(statement: ast.stmt, iterated: Set[str], index: "_Index", before: List[ast.stmt]) -> bool:
    """An assignment of a data source the script reads from files or through
    worker processes: a DataLoader or dataset, or batches a loop iterates
    that something outside torch builds (`train_data = read_cifar10(64)`)."""
    if not isinstance(statement, ast.Assign) or not isinstance(statement.value, ast.Call):
        return False
    if not all(isinstance(e, ast.Name) for t in statement.targets for e in ([t] if isinstance(t, ast.Name) else getattr(t, "elts", [None]))):
        return False
    calls = [c for c in ast.walk(statement.value) if isinstance(c, ast.Call)]
    named_data = {n for n in _bound(statement) & iterated if set(re.split(r"[_\d]+", n.lower())) & _DATA_WORDS}
    if not any(_data_call(c, index) for c in calls) and not named_data:
        return False
    return not _in_memory(statement, index, before, 0)


def _in_memory(statement: ast.stmt, index: "_Index", before: List[ast.stmt], depth: int) -> bool:
    """Whether an assignment only builds from torch, numpy, the file's own code
    and values built the same way (no files, no worker processes)."""
    if depth > 6 or not _straight(statement, index):
        return False
    for call in ast.walk(statement):
        if not isinstance(call, ast.Call):
            continue
        if _data_call(call) and _call_name(call) not in _IN_MEMORY_DATA:
            return False
        workers = next((k.value for k in call.keywords if k.arg == "num_workers"), None)
        if workers is not None and not (isinstance(workers, ast.Constant) and workers.value == 0):
            return False
        if _call_name(call) in _dataset_classes(index):
            return False  # the file's own dataset class: it may read files as it is built
    position = before.index(statement) if statement in before else len(before)
    for name in _loaded_names(statement):
        binder = next((s for s in reversed(before[:position]) if name in _bound(s)), None)
        if binder is not None and not isinstance(binder, _DEFINITIONS) and not _in_memory(binder, index, before, depth + 1):
            return False
    return True


def _root_name(expression: ast.expr) -> Optional[str]:
    while isinstance(expression, (ast.Attribute, ast.Call, ast.Subscript)):
        expression = expression.func if isinstance(expression, ast.Call) else expression.value
    return expression.id if isinstance(expression, ast.Name) else None


# Script code that reaches files, the network, other programs or the terminal:
# by the module it comes from (with the harmless parts of `os` and `sys`) ...
_IO_MODULES = {
    "os", "shutil", "subprocess", "socket", "requests", "urllib", "http", "wandb", "pickle", "h5py", "glob",
    "sys", "multiprocessing", "webbrowser", "ftplib", "smtplib", "pdb", "ipdb", "tensorboardX", "mlflow",
    "neptune", "comet_ml", "boto3", "gdown", "wget", "zipfile", "tarfile", "joblib", "dill",
}
_IO_HARMLESS = ("os.path.", "os.environ", "os.getenv", "os.cpu_count", "os.sep", "sys.argv", "sys.version", "sys.platform", "sys.maxsize")
# ... by name ...
_IO_NAMES = {
    "load", "save", "urlopen", "system", "popen", "hub", "sleep", "savefig", "imsave", "imwrite", "imread",
    "show", "set_trace", "spawn", "init_process_group", "makedirs", "mkdir", "remove", "rmtree", "unlink",
    "rename", "dump", "urlretrieve", "compile", "save_image", "to_csv", "to_pickle", "memmap", "fromfile", "loadtxt",
    "genfromtxt", "savetxt", "savez", "savez_compressed",
}
_IO_PREFIXES = ("load_", "save_", "download", "from_pretrained", "fetch", "read_", "write_", "to_file", "snapshot_download")
_IO_HARMLESS_NAMES = {"load_state_dict", "save_for_backward"}
# ... and the builtins that do.
_IO_BUILTINS = {"open", "input", "exit", "quit", "breakpoint", "eval", "exec", "compile", "__import__"}
# Loggers a script writes to: what it writes there never comes back.
_SINK_CALLS = {"SummaryWriter"}


def _io_call(call: ast.Call, index: "_Index") -> bool:
    """Whether running this call reaches files, the network, other programs or the terminal."""
    name = _call_name(call)
    root = _root_name(call.func)
    if isinstance(call.func, ast.Name) and not index.binders.get(name) and name in _IO_BUILTINS:
        return True
    if name in _IO_HARMLESS_NAMES:
        return False
    if name in _IO_NAMES or name.startswith(_IO_PREFIXES) or "download" in name.lower():
        return True
    binders = index.binders.get(root or "", []) + index.guard_imports.get(root or "", [])
    imported = [b for b in binders if isinstance(b, (ast.Import, ast.ImportFrom))]
    if any(_imports_from(b, root) in _IO_MODULES for b in imported):
        dotted = ast.unparse(call.func)
        module_name = next((a.name for b in imported for a in b.names if (a.asname or a.name).split(".")[0] == root and isinstance(b, ast.Import)), root)
        full = dotted.replace(root, module_name, 1) if module_name != root else dotted
        return not full.startswith(_IO_HARMLESS) and not any(full == h.rstrip(".") for h in _IO_HARMLESS)
    return False


# Modules whose `make(ID)` builds a reinforcement-learning environment, and
# the arguments of `make` that leave its spaces as the ID declares them.
_ENV_MODULES = {"gym", "gymnasium"}
_ENV_PLAIN_KEYWORDS = {"render_mode", "max_episode_steps", "autoreset", "disable_env_checker", "apply_api_compatibility"}


def _mark_environments(tree: ast.Module, index: "_Index", lines: List[str]) -> None:
    """`env = gym.make("CartPole-v1")` at module level (or in the `__main__`
    block): the program's environment, its data source. Its text becomes
    `__dl_env__(...)`, which makes the real one when the module imports and
    otherwise one synthesized with the spaces the ID declares; such a
    statement is a value the reproduction may build (`carried_value`)."""
    api = _step_api(tree)
    for statement in _script_units(tree):
        found = _environment(statement, index)
        if found is not None:
            index.environments[id(statement)] = dict(found, api=api)
    for statement in _script_units(tree):
        if id(statement) in index.environments:
            statement.dl_text = _ScriptRewrite(index, 0, lines, {}).text(statement)


def _environment(statement: ast.stmt, index: "_Index") -> Optional[dict]:
    """{name, id, module} for `name = gym.make(ID)`, ID a string literal or a
    name bound to one before (nothing else that may change the spaces passed)."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)):
        return None
    call = statement.value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "make" and isinstance(call.func.value, ast.Name)):
        return None
    module = call.func.value.id
    imports = [b for b in index.binders.get(module, []) + index.guard_imports.get(module, [])]
    if not imports or not all(isinstance(b, ast.Import) and _imports_from(b, module) in _ENV_MODULES for b in imports):
        return None
    if len(call.args) != 1 or any(k.arg not in _ENV_PLAIN_KEYWORDS for k in call.keywords):
        return None
    env_id = _string_before(call.args[0], statement, index)
    return None if env_id is None else {"name": statement.targets[0].id, "id": env_id, "module": module}


def _string_before(expression: ast.expr, statement: ast.stmt, index: "_Index") -> Optional[str]:
    """A string literal, or the literal the last assignment before `statement` binds the name to."""
    if isinstance(expression, ast.Constant) and isinstance(expression.value, str):
        return expression.value
    if not isinstance(expression, ast.Name):
        return None
    binders = index.binders.get(expression.id, []) + index.guard_values.get(expression.id, [])
    earlier = [b for b in binders if b.lineno < statement.lineno]
    last = max(earlier, key=lambda b: b.lineno, default=None)
    if isinstance(last, ast.Assign) and len(last.targets) == 1 and isinstance(last.targets[0], ast.Name):
        if isinstance(last.value, ast.Constant) and isinstance(last.value.value, str):
            return last.value.value
    return None


def _step_api(tree: ast.Module) -> Optional[str]:
    """How the program unpacks its environment: "old" when `step` gives four
    values (`s, r, done, info = env.step(a)`), "new" when it gives five or
    `reset` two (`s, info = env.reset()`); None when the file does not say
    (each call's own unpacking decides, at run time)."""
    counts = {"step": set(), "reset": set()}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple):
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in counts:
                counts[value.func.attr].add(len(node.targets[0].elts))
    new = 5 in counts["step"] or 2 in counts["reset"]
    old = 4 in counts["step"]
    if new == old:
        return None
    return "new" if new else "old"


class _ScriptRewrite:
    """The text of a chosen script statement, rewritten in place (line numbers
    kept) so that the confined run stays short and stays inside the worker:

    - a data source the script reads from disk or through worker processes
      becomes `__dl_data__(names, line)`: batches synthesized in the shape
      the code uses them (the script's input, as a function's arguments are);
    - a loop around the finding, a `while`, a loop that uses the data or one
      that trains (`.backward()`, `.step()`) runs a few iterations at most
      (`__dl_loop__`, `__dl_while__`): two for a loop holding another, three
      otherwise; a loop around the finding runs on until the finding's line
      first runs, if it takes more (at most `UNTIL_HIT` iterations);
    - `env = gym.make(ID)` becomes `__dl_env__(...)`: the real environment,
      or, when the module is not installed, one synthesized with the spaces
      the ID declares (the program's input, as its data is);
    - a statement whose only business is a file, the network, another
      program or the terminal (`torch.save(...)`, `os.makedirs(...)`,
      `model.load_state_dict(torch.load(path))`) is skipped
      (`__dl_skip__(line)`), and such a call inside a statement the code
      needs becomes `__dl_cut__(text, line)`, which the runtime stubs (the
      verdict then rests on a stand-in, if the value is used);
    - a logger it builds (`SummaryWriter()`) becomes `__dl_sink__(name, line)`;
    - `parser.parse_args()` reads no command line: `parse_args([])`, the
      file's own defaults.
    The finding's own statement is never skipped."""

    CAP_OUTER, CAP, UNTIL_HIT = 2, 3, 64

    def __init__(self, index: "_Index", line: int, lines: List[str], data: Dict[int, List[str]]):
        self.index, self.line, self.lines, self.data = index, line, lines, data
        self.data_names = {name for names in data.values() for name in names}
        self.argv = False
        self.edits: List[tuple] = []

    def text(self, statement: ast.stmt) -> str:
        self.edits = []
        self._statement(statement)
        start = _start(statement)
        chunk = [self.lines[i] if i < len(self.lines) else "\n" for i in range(start - 1, statement.end_lineno)]
        for (l1, c1), (l2, c2), replacement in sorted(self.edits, key=lambda e: (e[0], e[1]), reverse=True):
            first, last = chunk[l1 - start], chunk[l2 - start]
            c1, c2 = _char_column(first, c1), _char_column(last, c2)
            new = (first[:c1] + replacement + last[c2:]).splitlines(keepends=True)
            chunk[l1 - start : l2 - start + 1] = new
        # The `__main__` block's indentation off, so the text parses on its own
        # (the finding's column moves with it: `_script_slice`).
        indent = statement.col_offset
        return "".join(l[indent:] if l[:indent].isspace() else l for l in chunk)

    def _span(self, node: ast.AST):
        return (node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset)

    def _replace(self, node: ast.AST, call: str) -> None:
        """`node`'s text becomes `call` (ending with `)`), on as many lines."""
        start, end = self._span(node)
        self.edits.append((start, end, call[:-1] + "\n" * (end[0] - start[0]) + ")"))

    def _wrap(self, node: ast.expr, helper: str, limits: str) -> None:
        start, end = self._span(node)
        self.edits.append((end, end, f"), {limits})"))
        self.edits.append((start, start, f"{helper}(("))

    def _statement(self, statement: ast.stmt) -> None:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return
        holds_finding = _start(statement) <= self.line <= (statement.end_lineno or statement.lineno)
        line = statement.lineno
        if id(statement) in self.data:
            names = self.data[id(statement)]
            self._replace(statement.value, f"__dl_data__({tuple(names) if len(names) > 1 else names[0]!r}, {line})")
            return
        env = self.index.environments.get(id(statement))
        if env is not None:
            make = " ".join(ast.unparse(statement.value).split())
            self._replace(statement.value, f"__dl_env__({env['module']}, lambda: {make}, {env['id']!r}, {env['name']!r}, {line}, {env['api']!r})")
            return
        if (
            isinstance(statement, ast.Assign)
            and isinstance(statement.value, ast.Call)
            and _call_name(statement.value) in _SINK_CALLS
            and all(isinstance(t, ast.Name) for t in statement.targets)
        ):
            self._replace(statement.value, f"__dl_sink__({statement.targets[0].id!r}, {line})")
            return
        if (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
            and isinstance(statement.value, ast.Call)
            and _io_call(statement.value, self.index)
        ):
            self._cut(statement.value, statement.targets[0].id)
            return
        io_header = any(self._io_calls(e) for e in _own_expressions(statement))
        if not holds_finding and (
            (isinstance(statement, ast.Expr) and io_header) or (isinstance(statement, (ast.With, ast.AsyncWith)) and io_header)
        ):
            self._replace(statement, f"__dl_skip__({line})")
            return
        for expression in _own_expressions(statement):
            self._expression(expression)
        if isinstance(statement, (ast.For, ast.AsyncFor, ast.While)) and self._capped(statement, holds_finding):
            inner = any(
                isinstance(n, (ast.For, ast.AsyncFor, ast.While)) and self._capped(n, n.lineno <= self.line <= n.end_lineno)
                for body in (statement.body,) for s in body for n in ast.walk(s)
            )
            cap = self.CAP_OUTER if inner else self.CAP
            # A loop around the finding runs on until its line first runs (up to
            # UNTIL_HIT iterations): the program too gets there only after a
            # warm-up (`if len(replay_buffer) > batch_size:`).
            limits = f"{cap}, {line}, {self.UNTIL_HIT}" if holds_finding else f"{cap}, {line}"
            if isinstance(statement, ast.While):
                # `while test:` becomes a loop over a generator that checks the
                # test before each iteration (a fresh count each time the loop starts).
                start, end = self._span(statement.test)
                head = (statement.lineno, statement.col_offset)
                self.edits.append((end, end, f"), {limits})"))
                self.edits.append((head, start, "for __dl_step__ in __dl_while__(lambda: (" + "\n" * (start[0] - head[0])))
            else:
                self._wrap(statement.iter, "__dl_loop__", limits)
        for field in ("body", "orelse", "finalbody"):
            for inner_statement in getattr(statement, field, []):
                self._statement(inner_statement)
        for handler in getattr(statement, "handlers", []):
            for inner_statement in handler.body:
                self._statement(inner_statement)

    def _capped(self, loop: ast.stmt, holds_finding: bool) -> bool:
        if holds_finding or isinstance(loop, ast.While):
            return True
        if _loaded_names(loop) & self.data_names:
            return True  # it goes over the data, itself or through a function it calls
        return any(isinstance(n, ast.Call) and _call_name(n) in ("backward", "step") for n in ast.walk(loop))

    def _cut(self, call: ast.Call, name: Optional[str]) -> None:
        text = " ".join(ast.unparse(call.func).split())[:40]
        self._replace(call, f"__dl_cut__({(name or text.replace('.', '_'))!r}, {text!r}, {call.lineno})")

    def _io_calls(self, expression: ast.AST) -> List[ast.Call]:
        return [c for c in ast.walk(expression) if isinstance(c, ast.Call) and _io_call(c, self.index)]

    def _expression(self, expression: ast.AST) -> None:
        """Calls that reach outside become `__dl_cut__`; `parse_args()` reads no command line."""
        todo = [expression]
        while todo:
            node = todo.pop()
            if isinstance(node, ast.Call):
                if _io_call(node, self.index):
                    self._cut(node, None)
                    continue
                if _call_name(node) in ("parse_args", "parse_known_args") and not node.args and not node.keywords:
                    end = (node.end_lineno, node.end_col_offset - 1)
                    self.edits.append((end, end, "[]"))
                    self.argv = True
            todo.extend(ast.iter_child_nodes(node))


def _char_column(text: str, byte_column: int) -> int:
    """`ast` columns count UTF-8 bytes; string slicing counts characters."""
    return len(text.encode("utf-8")[:byte_column].decode("utf-8", errors="ignore"))


_COMPOUND = (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.If, ast.Try)


def _header_bound(statement: ast.stmt) -> Set[str]:
    """Names a compound statement binds itself (a loop target, `with ... as`), not its body."""
    if isinstance(statement, (ast.For, ast.AsyncFor)):
        return _bound(ast.Expr(statement.target))
    if isinstance(statement, (ast.With, ast.AsyncWith)):
        return set().union(*(_bound(ast.Expr(item.optional_vars)) for item in statement.items if item.optional_vars is not None))
    return set()


def _simple_statements(body: List[ast.stmt]) -> Iterable[ast.stmt]:
    """Top-level script code and the `__main__` block, in source order, with
    the statements inside loops, `with` and `if` blocks taken as they come."""
    for statement in body:
        if isinstance(statement, _DEFINITIONS):
            continue
        if isinstance(statement, _COMPOUND):
            inner = list(statement.body) + list(getattr(statement, "orelse", []))
            yield statement  # binds its own names (a loop target) but is never run
            yield from _simple_statements(inner)
        else:
            yield statement


_ALTERNATIVE_SITES = 2  # further call sites a spec carries


def _site_entry(site: dict) -> dict:
    """The spec's record of one call site: the call, its line, the file's other calls."""
    entry = {"call": ast.unparse(site["call"]), "line": site["call"].lineno, "others": site["others"]}
    if site.get("chain"):
        # A call of code that reaches the target, not of the target itself.
        entry["chain"] = True
    return entry


def _call_sites(tree: ast.Module, index: "_Index", target: dict, program: bool = False) -> List[dict]:
    """Calls of the finding's function (or of its method on an instance of its
    class) in the file's script code, whose arguments straight-line script
    statements build (`model = Net(4)`, `x = torch.randn(8, 4)`): the program's
    own inputs; the preferred first. Empty when the arguments need anything
    else to exist. `program`: instead, the script's argument-less calls of
    the file's functions that reach the target (`main()`, `train()`): the
    whole program, tried only when nothing else reaches the line."""
    statements = list(_simple_statements(tree.body))
    # The target itself first, then the file's functions that call it (up to
    # three calls away): `train(...)` in the script reaches `eval_epoch`. A
    # call fed by the file's own code (a model's outputs) wins over one given
    # only fresh tensors (`plot(torch.rand(4, 4))`): that is the program's data.
    found = []
    for name in _callers(tree, target):
        wanted = dict(target, function=name, kind="function") if name != target["function"] else target
        for position, statement in enumerate(statements):
            if isinstance(statement, _COMPOUND):
                continue
            for call in ast.walk(statement):
                if not isinstance(call, ast.Call) or not _calls_target(call, wanted):
                    continue
                if program != (wanted is not target and not (call.args or call.keywords)):
                    continue  # `main()` is the whole program, not a call that builds the target's inputs
                site = _arguments_slice(statements[:position], call, index, wanted)
                if site is None:
                    site = _arguments_slice(statements[:position], call, index, wanted, changers=False)
                if site is not None:
                    site["others"] = _other_calls(tree, target, call)
                    found.append(site)
    if program:
        return [dict(site, chain=True) for site in found]
    if not found and target["kind"] == "method":
        found = _chain_sites(tree, index, target, list(_site_statements(tree.body)))
    fed = [site for site in found if _fed_by_own_code(site, index)]
    return fed + [site for site in found if site not in fed] if fed else found


def _chain_sites(tree: ast.Module, index: "_Index", target: dict, statements: List[ast.stmt]) -> List[dict]:
    """Call sites of the methods and functions of the file that run the
    target method on the way (`learner.meta_train_step(tasks)` reaching
    `self.inner_update(...)`, `agent.train_step()` reaching
    `self.env.get_logprobs(...)`, `train(loader, model, ...)` calling
    `model(...)` for a `forward`, `optimizer.step()` on a parameter): the
    program's backward or step is often
    in such a caller, not in the target itself."""
    found = []
    grad_off = _grad_off_lines(tree)
    chain = _chain(tree, target)
    for wanted in chain:
        for position, statement in enumerate(statements):
            if isinstance(statement, _COMPOUND):
                continue
            for call in ast.walk(statement):
                if not isinstance(call, ast.Call) or not _calls_target(call, wanted) or call.lineno in grad_off:
                    continue  # a call the script makes with autograd off is not run with it on
                if wanted["kind"] == "function" and not (call.args or call.keywords):
                    continue  # `main()`: the whole program
                site = _arguments_slice(statements[:position], call, index, wanted)
                if site is None:
                    site = _arguments_slice(statements[:position], call, index, wanted, changers=False)
                if site is not None:
                    site["others"] = _chain_others(tree, [target] + chain, call)
                    site["chain"] = True
                    found.append(site)
        if found:
            return found
    return found


def _chain_others(tree: ast.Module, chain: List[dict], chosen: ast.Call) -> int:
    """Calls of the target or of the code that reaches it made from outside
    that code, besides `chosen`: the calls along the chain are the run itself."""
    inside = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and {"kind": "function", "function": node.name} in chain:
            inside.add(id(node))
        if isinstance(node, ast.ClassDef):
            for method in node.body:
                if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) and {"kind": "method", "class": node.name, "function": method.name} in chain:
                    inside.add(id(method))
    names = {entry["function"] for entry in chain}
    skipped = {id(call) for node in ast.walk(tree) if id(node) in inside for call in ast.walk(node)}
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node is not chosen and id(node) not in skipped:
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            count += called in names
    return count


def _grad_off_lines(tree: ast.Module) -> Set[int]:
    """Lines of script code inside `with torch.no_grad():` (or `inference_mode`)."""
    lines: Set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.With) and any(
            isinstance(item.context_expr, ast.Call) and _call_name(item.context_expr) in ("no_grad", "inference_mode")
            for item in node.items
        ):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def _site_statements(body: List[ast.stmt], nested: bool = False) -> Iterable[ast.stmt]:
    """`_simple_statements`, with the functions the `__main__` block defines
    (a callback it passes, `on_backward=check_previous`): part of the script."""
    for statement in body:
        if nested and isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield statement
        elif isinstance(statement, _DEFINITIONS):
            continue
        elif isinstance(statement, _COMPOUND):
            yield statement
            yield from _site_statements(list(statement.body) + list(getattr(statement, "orelse", [])), True)
        else:
            yield statement


def _add_definitions(spec: dict, index: "_Index", definitions: List[ast.stmt], lines: List[str]) -> None:
    """The blocks of `definitions` and what they need, added to the spec's
    blocks once each."""
    known = {(b["line"], b["text"]) for b in spec["blocks"]}
    extra = [_block(statement, lines) for statement in index.closure(definitions, values=True)]
    spec["blocks"] += [b for b in extra if (b["line"], b["text"]) not in known]


def _script_entry(tree: ast.Module, index: "_Index", target: dict, lines: List[str]) -> Optional[dict]:
    """The file's script code up to its last statement that may run the
    target, with what that statement needs (the statements that build and
    change its values: a training loop before an evaluation) and the
    straight-line code after it, rewritten to run briefly and confined
    (`_script_slice`): the program as `python file.py` runs it. None when no
    script statement reaches the target, or every slice is too big or reads
    what the verifier does not make."""
    reaching = _reaching_names(tree, index, target)
    for unit in reversed(_script_units(tree)):
        if _defines_only(unit) or not _called_names(unit, index) & reaching:
            continue
        script = _script_slice(tree, index, _start(unit), lines)
        if script is None or script.get("reason"):
            continue
        blocks = [
            {"line": _start(statement), "text": text, "script": True, "call_site": True}
            for statement, text in zip(script["statements"], script["texts"])
        ]
        last = script["statements"][-1]
        return {
            "call": f"{SCRIPT_FUNCTION}()", "line": _start(unit), "others": 0, "chain": True, "script": True, "blocks": blocks,
            "described": f"the file's script code (lines {_start(script['statements'][0])}-{last.end_lineno or last.lineno})",
            "definitions": script["definitions"], "argv": script["argv"],
        }
    return None


# What a call of a callable object (`model(x)`, `self.encoder(x)`) may run.
_OBJECT_CALL = "forward"


def _called_names(node: ast.AST, index: "_Index", receiver: Optional[str] = None) -> Set[str]:
    """Names of what `node` calls: functions and methods by name, and
    `forward` for a call of a value (a module held in a variable, or a member
    of `receiver`, the method's own object, whatever its name)."""
    names: Set[str] = set()
    for call in ast.walk(node):
        if not isinstance(call, ast.Call):
            continue
        func = call.func
        if isinstance(func, ast.Name):
            names.add(func.id)
            binders = index.binders.get(func.id, [])
            if not binders and func.id not in _BUILTIN_NAMES or binders and not all(_is_definition(b) for b in binders):
                names.add(_OBJECT_CALL)
        elif isinstance(func, ast.Attribute):
            names.add(func.attr)
            if receiver is not None and isinstance(func.value, ast.Name) and func.value.id == receiver:
                names.add(_OBJECT_CALL)
    return names


def _reaching_names(tree: ast.Module, index: "_Index", target: dict) -> Set[str]:
    """The target's name and the names of the file's functions and methods
    that call it, directly or through each other (by name: an over-estimate
    the run itself settles, since it counts whether the line ran)."""
    called: Dict[int, Set[str]] = {}
    definitions: List[ast.AST] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            definitions.append(node)
            called[id(node)] = _called_names(node, index)
        elif isinstance(node, ast.ClassDef):
            for method in node.body:
                if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    # Its first parameter is the object (`self`, whatever it is called).
                    receiver = method.args.args[0].arg if method.args.args else None
                    definitions.append(method)
                    called[id(method)] = _called_names(method, index, receiver)
            definitions.append(node)  # building the class runs its `__init__`
            called[id(node)] = {"__init__"}
    reaching = {target["function"]}
    grown = True
    while grown:
        grown = False
        for definition in definitions:
            if definition.name not in reaching and called[id(definition)] & reaching:
                reaching.add(definition.name)
                grown = True
    return reaching


def _chain(tree: ast.Module, target: dict, depth: int = 3) -> List[dict]:
    """Targets that reach the method, nearest first: methods calling it on
    `self` (or on a member, `self.env.get_logprobs(...)`, when no other class
    of the file has a method so named), and for `forward`, functions calling
    one of their parameters (`model(x)`); then what calls those."""
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)]
    functions = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    owners = {}
    for klass in classes:
        for method in klass.body:
            if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                owners.setdefault(method.name, []).append(klass.name)
    # Names bound to an instance of a class of the file (`dec_state = RNNDecoderState(...)`):
    # `dec_state.detach()` runs `DecoderState.detach` when that class is or inherits it.
    bound = _var_classes(tree, {klass.name for klass in classes})
    lineage = _lineage(classes)
    instances = {
        name: {var for var, klass in bound.items() if name in lineage.get(klass, {klass})}
        for name in {klass.name for klass in classes}
    }
    reached = [dict(target)]
    frontier = [dict(target)]
    for _ in range(depth):
        grown = []
        for klass in classes:
            for method in klass.body:
                if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) or method.name == "__init__":
                    continue
                entry = {"kind": "method", "class": klass.name, "function": method.name}
                if entry in reached or entry in grown:
                    continue
                if any(_reaches(method, klass.name, wanted, owners, instances) for wanted in frontier):
                    grown.append(entry)
        for function in functions:
            entry = {"kind": "function", "function": function.name}
            if entry in reached or entry in grown:
                continue
            parameters = {a.arg for a in function.args.args + function.args.kwonlyargs}
            calls = [c for c in ast.walk(function) if isinstance(c, ast.Call)]
            if any(
                (w["kind"] == "function" and isinstance(c.func, ast.Name) and c.func.id == w["function"])
                or (
                    # `SO2.from_matrix(...)`: a class method called on its class.
                    w["kind"] == "method" and isinstance(c.func, ast.Attribute) and c.func.attr == w["function"]
                    and isinstance(c.func.value, ast.Name) and c.func.value.id == w["class"]
                )
                or (w.get("function") == "forward" and isinstance(c.func, ast.Name) and c.func.id in parameters)
                or (
                    # `optimizer.step()` on a parameter: the method of an object the caller is given.
                    w["kind"] == "method" and isinstance(c.func, ast.Attribute) and c.func.attr == w["function"]
                    and isinstance(c.func.value, ast.Name) and c.func.value.id in parameters
                )
                or (
                    # `dec_state.detach()` on an instance of the class or of a subclass.
                    w["kind"] == "method" and isinstance(c.func, ast.Attribute) and c.func.attr == w["function"]
                    and isinstance(c.func.value, ast.Name) and c.func.value.id in instances.get(w["class"], ())
                )
                for w in frontier for c in calls
            ):
                grown.append(entry)
        if not grown:
            break
        reached += grown
        frontier = grown
    return reached[1:]


def _lineage(classes: List[ast.ClassDef]) -> Dict[str, Set[str]]:
    """Each class of the file with the file's classes it inherits from, itself included."""
    bases = {k.name: [b.id for b in k.bases if isinstance(b, ast.Name)] for k in classes}
    lineage: Dict[str, Set[str]] = {}
    for name in bases:
        seen, todo = set(), [name]
        while todo:
            current = todo.pop()
            if current not in seen:
                seen.add(current)
                todo.extend(bases.get(current, []))
        lineage[name] = seen
    return lineage


def _var_classes(tree: ast.Module, classes: Set[str]) -> Dict[str, str]:
    """Names (and `self.` members) the file binds to an instance of one of its
    classes, `dec_state = RNNDecoderState(...)`: the first such binding of each."""
    var_classes: Dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            value = _strip_chain(node.value)
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in classes:
                key = node.targets[0]
                if isinstance(key, ast.Name):
                    var_classes.setdefault(key.id, value.func.id)
                elif isinstance(key, ast.Attribute):
                    var_classes.setdefault(key.attr, value.func.id)
    return var_classes


def _reaches(method: ast.AST, owner: str, wanted: dict, owners: Dict[str, List[str]], instances: Optional[Dict[str, Set[str]]] = None) -> bool:
    """Whether `method` (of class `owner`) calls `wanted` on `self`, on a member
    of `self`, or on a name bound to an instance of its class or a subclass."""
    for node in ast.walk(method):
        func = node.func if isinstance(node, ast.Call) else None
        if wanted["kind"] == "function":
            if isinstance(func, ast.Name) and func.id == wanted["function"]:
                return True
            continue
        if not isinstance(func, ast.Attribute) or func.attr != wanted["function"]:
            continue
        receiver = func.value
        if isinstance(receiver, ast.Name) and receiver.id in ("self", "cls") and owner == wanted["class"]:
            return True
        if isinstance(receiver, ast.Name) and receiver.id == wanted["class"]:
            return True  # `SO2.from_matrix(...)`: a class method
        if isinstance(receiver, ast.Name) and receiver.id in (instances or {}).get(wanted["class"], ()):
            return True  # `state.detach()` on an instance of the class or of a subclass
        if (
            isinstance(receiver, ast.Attribute) and isinstance(receiver.value, ast.Name) and receiver.value.id == "self"
            and owners.get(wanted["function"]) == [wanted["class"]]
        ):
            return True
        # On an argument (`trainer.test(model, ...)` calling `model.test_step(...)`),
        # when no other class of the file has a method so named.
        arguments = {a.arg for a in method.args.args[1:] + method.args.kwonlyargs} if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)) else set()
        if isinstance(receiver, ast.Name) and receiver.id in arguments and owners.get(wanted["function"]) == [wanted["class"]]:
            return True
    return False


def _fed_by_own_code(site: dict, index: "_Index") -> bool:
    """Whether a call site's arguments come through the file's own classes or
    functions (a model built, a function's result), not only from torch."""
    called = _root_name(site["call"].func)
    parts = list(site["statements"]) + list(site["call"].args) + [k.value for k in site["call"].keywords]
    names = set().union(*(_loaded_names(p) for p in parts)) - {called}
    return any(
        isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for n in names for b in index.binders.get(n, [])
    )


def _script_grad_off(tree: ast.Module) -> Optional[int]:
    """The line of a script-level `torch.set_grad_enabled(False)`: autograd off
    for everything the program runs after it (e.g. on import)."""
    for statement in _simple_statements(tree.body):
        value = getattr(statement, "value", None)
        if (
            isinstance(statement, ast.Expr)
            and isinstance(value, ast.Call)
            and _call_name(value) == "set_grad_enabled"
            and value.args
            and isinstance(value.args[0], ast.Constant)
            and value.args[0].value is False
        ):
            return statement.lineno
    return None


def _grad_off_on_import(tree: ast.Module, line: int) -> bool:
    """Whether the switch on `line` is a statement of the module itself (it runs
    on import, before anything can call the file's functions) and no bare
    `set_grad_enabled(True)` or `enable_grad()` statement turns autograd back on."""
    if not any(s.lineno == line for s in tree.body):
        return False
    for node in ast.walk(tree):
        value = node.value if isinstance(node, ast.Expr) else None
        if isinstance(value, ast.Call) and _call_name(value) in ("set_grad_enabled", "enable_grad"):
            if _call_name(value) == "enable_grad" or not (value.args and isinstance(value.args[0], ast.Constant) and value.args[0].value is False):
                return False
    return True


def _other_calls(tree: ast.Module, target: dict, chosen: ast.Call) -> int:
    """Calls of the target or of the file's functions that reach it, besides `chosen`."""
    names = set(_callers(tree, target))
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node is not chosen:
            func = node.func
            if isinstance(func, ast.Name):
                count += func.id in names
            elif isinstance(func, ast.Attribute):
                # `obj.update(...)` may run the target method; `model.train()`
                # is no call of a function `train`.
                count += target["kind"] == "method" and func.attr == target["function"]
    return count


def _callers(tree: ast.Module, target: dict, depth: int = 3) -> List[str]:
    """The target's name, then the top-level functions that call it, nearest first."""
    names = [target["function"]]
    functions = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if target["kind"] == "method" and target.get("class"):
        # A method: the file's functions that build its class and call it
        # (`agent = DQNAgent()` ... `agent.update(...)` in a training loop).
        frontier = [node.name for node in functions if _builds_and_calls(node, target)]
        names += frontier
    elif target["kind"] != "function":
        return names
    else:
        frontier = [target["function"]]
    calls = {node.name: {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)} for node in functions}
    for _ in range(depth):
        frontier = [f for f, called in calls.items() if f not in names and called & set(frontier)]
        names += frontier
    return names


def _builds_and_calls(function: ast.AST, target: dict) -> bool:
    """Whether a function binds a name to a new instance of the target's class
    and calls the target method on it."""
    built = {
        t.id
        for node in ast.walk(function) if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _call_name(node.value) == target["class"]
        for t in node.targets if isinstance(t, ast.Name)
    }
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == target["function"]
        and isinstance(node.func.value, ast.Name) and node.func.value.id in built
        for node in ast.walk(function)
    )


def _calls_target(call: ast.Call, target: dict) -> bool:
    func = call.func
    if target["kind"] == "function":
        return isinstance(func, ast.Name) and func.id == target["function"]
    return isinstance(func, ast.Attribute) and func.attr == target["function"] and isinstance(func.value, ast.Name)


def _arguments_slice(before: List[ast.stmt], call: ast.Call, index: "_Index", target: dict, changers: bool = True) -> Optional[dict]:
    if any(not _script_call(inner, index) for inner in ast.walk(call) if isinstance(inner, ast.Call) and inner is not call):
        return None
    wanted = _loaded_names(call)
    chosen: List[ast.stmt] = []
    receiver_built = target["kind"] == "function"
    resolved: Set[str] = set()
    for statement in reversed(before):
        bound = _header_bound(statement) if isinstance(statement, _COMPOUND) else _bound(statement)
        first = _first_iteration(statement) if bound & wanted and isinstance(statement, (ast.For, ast.AsyncFor)) else None
        if first is not None:
            # The call inside a loop over literal values: its first iteration's values, as the program starts.
            chosen.append(first)
            resolved |= bound
            continue
        if not bound & wanted:
            # A call that changes what the arguments hold (`prune(model.layer, 90)`,
            # `model.eval()`) is part of what the target is given.
            defined = {n for n in wanted if n in index.guard_imports or (all(map(_is_definition, index.binders.get(n, []))) if index.binders.get(n) else n in _BUILTIN_NAMES)}
            # A name the slice binds later is a new object there: what changed the old one does not matter.
            variables = wanted - defined - resolved
            # (Only when what it reads exists there: not a function the `__main__` block defines.)
            known = all(
                n in index.binders or n in _BUILTIN_NAMES or any(n in (_header_bound(s) if isinstance(s, _COMPOUND) else _bound(s)) for s in before)
                for n in _loaded_names(statement)
            )
            # (`x_out = trainer.fit(...)` too: a method of the receiver, kept for what it sets on it.)
            method = isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Call) and isinstance(statement.value.func, ast.Attribute) and _root_name(statement.value.func.value) in variables
            # (And an assignment into one, `students[beta] = copy.deepcopy(student0)`.)
            method = method or (isinstance(statement, ast.Assign) and all(isinstance(t, (ast.Subscript, ast.Attribute)) and _root_name(t) in variables for t in statement.targets))
            # (And the file's function the receiver is handed to, `run_maze(env, RL)`: a
            # loop that fills the state the method reads, training or not.)
            receiver = call.func.value.id if target["kind"] == "method" and isinstance(call.func, ast.Attribute) and isinstance(call.func.value, ast.Name) else None
            value = getattr(statement, "value", None)
            method = method or (
                isinstance(statement, ast.Expr) and isinstance(value, ast.Call) and receiver in variables
                and receiver in {_root_name(a) for a in list(value.args) + [k.value for k in value.keywords]}
                and any(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) for b in index.binders.get(_root_name(value.func) or "", []))
            )
            # (And a result the file's function computes from one, `x, scores = input_importance(model, inputs)`:
            # the graph it keeps alive still records the tensors the target may swap.)
            method = method or (
                isinstance(statement, ast.Assign) and isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                and any(_root_name(a) in variables for a in list(value.args) + [k.value for k in value.keywords])
                and any(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) for b in index.binders.get(value.func.id, []))
            )
            if changers and known and ((isinstance(statement, ast.Expr) and _changes(statement, variables, index)) or method) and _straight(statement, index):
                chosen.append(statement)
                wanted |= _loaded_names(statement)
            continue
        if not _straight(statement, index):
            return None
        chosen.append(statement)
        wanted |= _loaded_names(statement)
        if _fresh_binding(statement):
            resolved |= bound
        if not receiver_built and isinstance(call.func, ast.Attribute) and call.func.value.id in bound:
            value = getattr(statement, "value", None)
            receiver_built = _constructed(value) == target.get("class")
    if not receiver_built or len(chosen) > _SCRIPT_LIMIT:
        return None
    chosen.reverse()
    bound_here = set().union(*(_bound(s) for s in chosen)) if chosen else set()
    needed = (set().union(*(_loaded_names(s) for s in chosen)) if chosen else set()) | _loaded_names(call)
    definitions = [b for name in sorted(needed - bound_here) for b in index.binders.get(name, []) if _is_definition(b)]
    if any(name not in bound_here and not index.binders.get(name) and name not in _SCRIPT_BUILTINS for name in _loaded_names(call)):
        return None
    return {"statements": chosen, "call": call, "definitions": definitions}


def _constructed(value: Optional[ast.expr]) -> Optional[str]:
    """The class a value is built from: `Net(4)`, also through method calls on
    the new instance (`NeuralNet(module).initialize()`), which the program makes too."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and isinstance(value.func.value, ast.Call):
        value = value.func.value
    return _call_name(value) if isinstance(value, ast.Call) else None


_CTOR_SITES = 6


def _ctor_sites(tree: ast.Module, index: "_Index", lines: List[str]):
    """For the file's classes that script code builds from values it computes
    (`backbone = nn.Sequential(...)`, `model = Finetune(backbone, steps=3)`):
    the first such call, with the straight-line statements that build its
    arguments. ({class: {"statements", "call", "line"}}, definitions they use)."""
    statements = list(_simple_statements(tree.body))
    sites: Dict[str, dict] = {}
    definitions: List[ast.stmt] = []
    for position, statement in enumerate(statements):
        if len(sites) >= _CTOR_SITES or isinstance(statement, _COMPOUND):
            continue
        for call in ast.walk(statement):
            name = call.func.id if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) else None
            if name not in index.classes or name in sites or not (call.args or call.keywords):
                continue
            site = _arguments_slice(statements[:position], call, index, {"kind": "function", "function": name}, changers=False)
            if site is None or any(
                isinstance(c, ast.Call) and _call_name(c) in ("parse_args", "parse_known_args")
                for part in site["statements"] + [call] for c in ast.walk(part)
            ):
                continue
            sites[name] = {
                "statements": [_block(s, lines) for s in site["statements"]],
                "call": ast.unparse(call),
                "line": call.lineno,
            }
            definitions.extend(site["definitions"])
    return sites, definitions


def _first_iteration(loop: ast.stmt) -> Optional[ast.stmt]:
    """`for a, b in ((1, 2), (3, 4)):` as `a, b = (1, 2)` (on the loop's line), when
    the loop goes over literal values; None otherwise."""
    target = loop.target
    if not all(isinstance(n, (ast.Name, ast.Tuple, ast.List, ast.Store)) for n in ast.walk(target)):
        return None
    if not isinstance(loop.iter, (ast.Tuple, ast.List)) or not loop.iter.elts:
        return None
    try:
        ast.literal_eval(loop.iter)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    assign = ast.Assign(targets=[target], value=loop.iter.elts[0], lineno=loop.lineno, col_offset=loop.col_offset)
    assign.end_lineno, assign.end_col_offset = loop.lineno, loop.col_offset
    assign.dl_text = " " * loop.col_offset + f"{ast.unparse(target)} = {ast.unparse(loop.iter.elts[0])}\n"
    return assign


def _straight(statement: ast.stmt, index: "_Index") -> bool:
    if isinstance(statement, ast.FunctionDef) and not statement.decorator_list:
        # A callback the script defines (only `_site_statements` yields one).
        return all(_script_call(node, index) for node in ast.walk(statement) if isinstance(node, ast.Call))
    if not isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)):
        return False
    for node in ast.walk(statement):
        if isinstance(node, (ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
            return False
        if isinstance(node, ast.Call) and not _script_call(node, index):
            return False
    return True


def _straight_block(statement: ast.stmt, index: "_Index") -> bool:
    """A straight statement, or a `try` or `if` made only of straight ones,
    asserts and raises (`try: out.sum().backward() except RuntimeError as e:
    assert ...`): code that uses the values once, without loops."""
    if isinstance(statement, (ast.Assert, ast.Raise, ast.Pass)):
        return all(
            _script_call(node, index) or isinstance(node.func, ast.Name) and node.func.id in _BUILTIN_EXCEPTIONS
            for node in ast.walk(statement) if isinstance(node, ast.Call)
        )
    if isinstance(statement, ast.Try):
        parts = statement.body + statement.orelse + statement.finalbody + [s for h in statement.handlers for s in h.body]
        return all(_straight_block(part, index) for part in parts)
    if isinstance(statement, ast.If):
        return all(_straight_block(part, index) for part in statement.body + statement.orelse)
    return _straight(statement, index)


def _script_call(call: ast.Call, index: "_Index") -> bool:
    name = _call_name(call).lower()
    unsafe = name in _SCRIPT_UNSAFE or name.startswith(_SCRIPT_UNSAFE_PREFIXES) or "download" in name
    func = call.func
    root = func
    while isinstance(root, (ast.Attribute, ast.Call, ast.Subscript)):
        root = root.func if isinstance(root, ast.Call) else root.value
    if not isinstance(root, ast.Name):
        return isinstance(func, ast.Attribute) and not unsafe  # a method of a computed value
    binders = index.binders.get(root.id, [])
    imported = [b for b in binders if isinstance(b, (ast.Import, ast.ImportFrom))]
    if imported:
        return not unsafe and all(_imports_from(b, root.id) in _SCRIPT_MODULES for b in imported)
    if binders and all(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for b in binders):
        # The file's own code: the verifier runs it anyway, confined.
        return "download" not in name
    if isinstance(func, ast.Attribute):
        return not unsafe  # a method of a value the script computed
    return not binders and root.id in _SCRIPT_BUILTINS


def _imports_from(statement: ast.stmt, name: str) -> str:
    """The top-level package `name` comes from in this import statement."""
    for alias in statement.names:
        if (alias.asname or alias.name).split(".")[0] == name:
            module = statement.module if isinstance(statement, ast.ImportFrom) else alias.name
            return (module or "").split(".")[0]
    return ""


def _statement_text(tree: ast.Module, line: int) -> Optional[str]:
    """The innermost simple statement on the finding's line, as source."""
    best = None
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.While, ast.With, ast.Try, ast.AsyncFor, ast.AsyncWith)):
            if node.lineno <= line <= (node.end_lineno or node.lineno):
                best = node
    return ast.unparse(best) if best is not None else None


def _enclosing(body: Iterable[ast.stmt], line: int) -> Optional[ast.stmt]:
    for statement in body:
        start = min([statement.lineno] + [d.lineno for d in getattr(statement, "decorator_list", [])])
        if start <= line <= (statement.end_lineno or statement.lineno):
            return statement
    return None


def _start(statement: ast.stmt) -> int:
    return min([statement.lineno] + [d.lineno for d in getattr(statement, "decorator_list", [])])


def _block(statement: ast.stmt, lines: List[str]) -> dict:
    if hasattr(statement, "dl_text"):  # written by the extraction (`_first_iteration`)
        return {"line": statement.lineno, "text": statement.dl_text}
    start = _start(statement)
    text = "".join(lines[start - 1 : statement.end_lineno])
    if _guarded_imports(statement):
        return {"line": start, "text": text, "imports": True}
    return {"line": start, "text": text}


def _loaded_names(node: ast.AST) -> Set[str]:
    names = set()
    for child in ast.walk(node):
        if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Load):
            names.add(child.id)
        elif isinstance(child, ast.Attribute):
            # `torch.nn.functional` needs `torch`; the Name below covers it.
            continue
    return names


def _is_main_guard(statement: ast.stmt) -> bool:
    test = getattr(statement, "test", None)
    return (
        isinstance(statement, ast.If)
        and isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
    )


def _call_name(call: ast.Call) -> str:
    func = call.func
    while isinstance(func, ast.Call):
        func = func.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _is_definition(statement: ast.stmt) -> bool:
    """A module-level statement that only defines (never loads, trains or prints)."""
    if isinstance(statement, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        value = statement.value
        if value is None:
            return True
        return all(_call_name(c) in _DEFINITION_CALLS for c in ast.walk(value) if isinstance(c, ast.Call))
    if isinstance(statement, (ast.Try, ast.If)) and not _is_main_guard(statement):
        inner = list(statement.body) + list(getattr(statement, "orelse", []))
        for handler in getattr(statement, "handlers", []):
            if not _import_failure_handler(handler, statement):
                inner.extend(handler.body)
        inner.extend(getattr(statement, "finalbody", []))
        return all(_is_definition(s) or isinstance(s, (ast.Pass, ast.Expr)) and _harmless(s) for s in inner)
    return False


_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}


def _import_failure_handler(handler: ast.ExceptHandler, statement: ast.Try) -> bool:
    """`except ImportError: print(e); raise` around imports only: it runs only
    when an import fails, which the verifier meets as a missing name (as it
    does a plain import's); reporting or re-raising changes nothing else."""
    caught = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    if not caught or not all(isinstance(c, ast.Name) and c.id in _IMPORT_ERRORS for c in caught):
        return False
    if not statement.body or not all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in statement.body):
        return False
    return all(isinstance(s, ast.Raise) or _prints(s) or _harmless(s) for s in handler.body)


def _prints(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) and _call_name(statement.value) == "print"


def _harmless(statement: ast.stmt) -> bool:
    return isinstance(statement, ast.Pass) or (
        isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
    ) or (isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) and _call_name(statement.value) in ("warn", "warning", "filterwarnings"))


def _bound(statement: ast.stmt) -> Set[str]:
    names = set()
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    for node in ast.walk(statement):
        if isinstance(node, ast.alias):
            if node.name != "*":
                names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


class _Index:
    """Which top-level statements bind which names."""

    def __init__(self, tree: ast.Module) -> None:
        self.statements = tree.body
        self.binders: Dict[str, List[ast.stmt]] = {}
        self.classes: Dict[str, ast.ClassDef] = {}
        self.unavailable: Dict[str, str] = {}
        # Imports inside `if __name__ == "__main__":`, for what script code there calls.
        self.guard_imports: Dict[str, List[ast.stmt]] = {}
        self._values: Dict[str, bool] = {}
        # `from constants import *`: where a name no statement binds may come from.
        self.stars = [s for s in tree.body if isinstance(s, ast.ImportFrom) and any(a.name == "*" for a in s.names)]
        # Values the `__main__` block sets before it calls the file's functions,
        # which read them as globals (`model = VAE()`), with the block's place.
        self.guard_values: Dict[str, List[ast.stmt]] = {}
        self.guard_place: Dict[int, int] = {}
        # Unavailable globals that hold the program's data (`train_loader =
        # read_cifar10(64)`): batches synthesized for them are its input.
        self.data_globals: Set[str] = set()
        # `env = gym.make(ID)` statements, by id: the program's environment (`_mark_environments`).
        self.environments: Dict[int, dict] = {}
        self._iterated = set().union(*(_iterated_names(s) for s in tree.body)) if tree.body else set()
        for place, statement in enumerate(tree.body):
            if isinstance(statement, ast.ImportFrom) and statement.module == "__future__":
                continue
            if _is_main_guard(statement):
                for inner in statement.body:
                    if isinstance(inner, (ast.Import, ast.ImportFrom)):
                        for name in _bound(inner):
                            self.guard_imports.setdefault(name, []).append(inner)
                    elif isinstance(inner, ast.Assign):
                        self.guard_place[id(inner)] = place
                        for name in _bound(inner):
                            self.guard_values.setdefault(name, []).append(inner)
                    else:
                        self.guard_place[id(inner)] = place
                continue
            if isinstance(statement, ast.ClassDef):
                self.classes[statement.name] = statement
            for name in _bound(statement):
                self.binders.setdefault(name, []).append(statement)

    def closure(self, roots: List[ast.stmt], values: bool = False) -> List[ast.stmt]:
        """The roots and every definition they use, transitively, in file order
        (with `values`, also the module-level values safe to build: `carried_value`)."""
        chosen: List[ast.stmt] = []
        seen_ids: Set[int] = set()
        todo = list(roots)
        while todo:
            statement = todo.pop()
            if id(statement) in seen_ids:
                continue
            seen_ids.add(id(statement))
            chosen.append(statement)
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                # `step = torch.no_grad()(step)`: the program runs the rebound definition.
                todo.extend(
                    b for b in self.binders.get(statement.name, [])
                    if isinstance(b, ast.Assign) and _is_definition(b) and statement.name in _loaded_names(b)
                )
            for name in _loaded_names(statement):
                if name not in self.binders and name not in _BUILTIN_NAMES:
                    todo.extend(self.stars)
                    if values and self.guard_value(name):
                        todo.extend(self.guard_values[name] + (self._guard_changes(name) or []))
                    elif name in self.guard_values:
                        self.unavailable.setdefault(
                            name,
                            f"is set in the `__main__` block (line {self.guard_values[name][0].lineno}), which the verifier never runs",
                        )
                        self._note_data(name, self.guard_values[name])
                carried = values and self.carried_value(name)
                if carried:
                    # What the program does to the value before using it (`parser.add_argument(...)`).
                    todo.extend(s for s in self.statements if isinstance(s, ast.Expr) and id(s) not in seen_ids and _changes(s, {name}, self) and _safe_code(s, self))
                for binder in self.binders.get(name, []):
                    if id(binder) in seen_ids:
                        continue
                    if carried or _is_definition(binder):
                        todo.append(binder)
                    else:
                        self.unavailable.setdefault(
                            name,
                            f"is module-level script code (line {binder.lineno}), which the verifier never runs",
                        )
                        self._note_data(name, self.binders[name])
        order = {id(s): i for i, s in enumerate(self.statements)}
        return sorted(chosen, key=lambda s: (order.get(id(s), self.guard_place.get(id(s), 0)), s.lineno))

    def _guard_changes(self, name: str) -> Optional[List[ast.stmt]]:
        """The `__main__` block's statements that change `name` before it first
        calls a function of the file (`model.eval()`, `teacher.requires_grad_(False)`);
        None when one of them cannot be carried (a loop, a file read)."""
        guard = next((s for s in self.statements if _is_main_guard(s)), None)
        if guard is None:
            return []
        functions = {n for n, bs in self.binders.items() if any(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) for b in bs)}
        found = []
        for statement in guard.body:
            if any(isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in functions for c in ast.walk(statement)):
                break
            if isinstance(statement, ast.Assign) or not _changes(statement, {name}, self):
                continue
            if not (isinstance(statement, ast.Expr) and _safe_code(statement, self)):
                return None
            found.append(statement)
        return found

    def _loaded_before_use(self, name: str) -> bool:
        """Whether the `__main__` block loads stored weights into `name` before
        it first calls a function of the file (which then sees them)."""
        guard = next((s for s in self.statements if _is_main_guard(s)), None)
        if guard is None:
            return False
        functions = {n for n, bs in self.binders.items() if any(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef)) for b in bs)}
        first_use = min(
            (c.lineno for c in ast.walk(guard) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in functions),
            default=None,
        )
        return any(
            isinstance(c, ast.Call) and _call_name(c) in ("load_state_dict", "load") and _root_name(c.func) == name
            and (first_use is None or c.lineno < first_use)
            for c in ast.walk(guard)
        )

    def _note_data(self, name: str, binders: List[ast.stmt]) -> None:
        if binders and all(_data_source(b, self._iterated, self, self.statements) for b in binders):
            self.data_globals.add(name)

    def guard_value(self, name: str, depth: int = 0) -> bool:
        """Whether the `__main__` block builds `name` as the program does and
        safely: every assignment of it a file's class, torch or a literal
        (`model = VAE()`, `criterion = nn.MSELoss()`), reading only
        definitions, literals, and the block's other such values."""
        binders = self.guard_values.get(name, [])
        if not binders or name in self.binders or depth > 4 or self._loaded_before_use(name) or self._guard_changes(name) is None:
            return False
        for binder in binders:
            if not _safe_value(binder, self):
                return False
            for call in ast.walk(binder.value):
                if not isinstance(call, ast.Call):
                    continue
                root = _root_name(call.func)
                own = [b for b in self.binders.get(root or "", []) if not isinstance(b, ast.ClassDef)]
                if own and not all(isinstance(b, (ast.Import, ast.ImportFrom)) and _imports_from(b, root) == "torch" for b in own):
                    return False  # a function of the file (a training run) or another library
            for read in _loaded_names(binder.value) - {name}:
                if read in self.binders:
                    if not all(_is_definition(b) for b in self.binders[read]):
                        return False
                elif read not in _BUILTIN_NAMES and not (read in self.guard_values and self.guard_value(read, depth + 1)):
                    return False
        return True

    def carried_value(self, name: str, depth: int = 0) -> bool:
        """Whether a module-level value the file's code reads can be built as the
        program builds it: every assignment of it straight-line code that only
        calls torch, numpy, math or the file's own code (`criterion =
        nn.MSELoss()`, `netD = Discriminator(64)`), from names that are
        definitions or such values, and no statement loads weights into it."""
        if name in self._values:
            return self._values[name]
        self._values[name] = False  # a cycle is not a value
        binders = self.binders.get(name, [])
        plain = [b for b in binders if not _is_definition(b)]
        ok = bool(plain) and depth < 5 and all(_safe_value(b, self) or id(b) in self.environments for b in plain)
        if ok:
            for statement in self.statements:
                for call in ast.walk(statement):
                    if isinstance(call, ast.Call) and _call_name(call) == "load_state_dict" and _root_name(call.func) == name:
                        ok = False
        if ok:
            for read in set().union(*(_loaded_names(b) - _comprehension_names(b) for b in plain)) - {name}:
                readers = self.binders.get(read, [])
                if not readers:
                    ok = ok and read in _BUILTIN_NAMES
                elif not all(_is_definition(r) for r in readers):
                    ok = ok and self.carried_value(read, depth + 1)
        self._values[name] = ok
        return ok


_BUILTIN_NAMES = set(dir(__import__("builtins")))
_BUILTIN_EXCEPTIONS = {name for name in _BUILTIN_NAMES if name.endswith(("Error", "Exception"))}


def _comprehension_names(statement: ast.stmt) -> Set[str]:
    """Names a comprehension in the statement binds for itself (`{c: i for i, c in ...}`)."""
    names: Set[str] = set()
    for node in ast.walk(statement):
        if isinstance(node, ast.comprehension):
            names |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
    return names


def _safe_value(statement: ast.stmt, index: "_Index") -> bool:
    """A plain assignment whose value builds nothing outside the process (see
    `_straight`; an `argparse` parser too, read with an explicit argument list)."""
    if not isinstance(statement, (ast.Assign, ast.AnnAssign)) or statement.value is None or not _fresh_binding(statement):
        return False
    return _safe_code(statement, index)


def _safe_code(statement: ast.stmt, index: "_Index") -> bool:
    if not isinstance(statement, (ast.Assign, ast.AnnAssign, ast.Expr)):
        return False
    for node in ast.walk(statement):
        if isinstance(node, (ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
            return False
        if not isinstance(node, ast.Call):
            continue
        if _io_call(node, index):
            return False
        if _call_name(node) in ("parse_args", "parse_known_args") and not node.args and not node.keywords:
            return False  # it would read the worker's command line, not the program's
        root = _root_name(node.func)
        parser = any(_imports_from(b, root) == "argparse" for b in index.binders.get(root or "", []) if isinstance(b, (ast.Import, ast.ImportFrom)))
        if not parser and not _script_call(node, index):
            return False
    return True


def _base_names(node: ast.ClassDef) -> List[str]:
    names = []
    for base in node.bases:
        if isinstance(base, ast.Attribute):
            names.append(base.attr)
        elif isinstance(base, ast.Name):
            names.append(base.id)
    return names


def _model_classes(tree: ast.Module, index: _Index) -> List[str]:
    """The file's nn.Module subclasses (through the file's own base classes too)."""
    models: List[str] = []
    changed = True
    while changed:
        changed = False
        for name, node in index.classes.items():
            if name in models:
                continue
            bases = _base_names(node)
            if any(b in ("Module", "LightningModule") or b in models for b in bases):
                models.append(name)
                changed = True
    order = list(index.classes)
    return sorted(models, key=order.index)


def _roots(models: List[str], index: _Index) -> List[str]:
    """Model classes no other model class builds: the candidates for `model`."""
    used: Set[str] = set()
    for name in models:
        for child in ast.walk(index.classes[name]):
            if isinstance(child, ast.Name) and child.id in models and child.id != name:
                used.add(child.id)
    with_forward = [
        m for m in models
        if any(isinstance(s, ast.FunctionDef) and s.name == "forward" for s in index.classes[m].body)
        or any(b in models for b in _base_names(index.classes[m]))
    ]
    return [m for m in with_forward if m not in used] or with_forward


def _builders(name: str, models: List[str], index: _Index) -> List[str]:
    """The root model classes that build class `name`, directly or through other classes."""

    def reached(start: str) -> Set[str]:
        seen: Set[str] = set()
        todo = [start]
        while todo:
            for child in ast.walk(index.classes[todo.pop()]):
                if isinstance(child, ast.Name) and child.id in models and child.id not in seen:
                    seen.add(child.id)
                    todo.append(child.id)
        return seen

    return [root for root in _roots(models, index) if root != name and name in reached(root)]


def _hinted_definitions(hints: dict, index: _Index) -> List[ast.stmt]:
    """The file's classes and functions its calls of the target pass in: the
    class of an argument (`ClassMemory(5, 8)`), a function or class a
    constructor call found in the file is given (`MoCo(mlp_encoder)`)."""
    names = set(hints.get("param_classes", {}).values())
    for texts in hints.get("ctor_calls", {}).values():
        for text in texts:
            call = ast.parse(text, mode="eval").body
            names |= {n.id for a in list(call.args) + [k.value for k in call.keywords] for n in ast.walk(a) if isinstance(n, ast.Name)}
    found = []
    for name in sorted(names):
        binders = index.binders.get(name, [])
        if binders and all(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for b in binders):
            found.extend(binders)
    return found


def _later_use(tree: ast.Module, finding: Finding) -> Optional[int]:
    """For a `volatile=True` finding in top-level script code, whose claim is
    about the graph the next model call records: the line of the first later
    statement that hands a value the finding's statement binds to a call (a
    loop that evaluates `net(test_x)`), so the script runs up to there. None
    for other findings or when nothing later uses the values so."""
    if finding.code not in ("DL701", "DL702") or not finding.message.startswith("`volatile="):
        return None
    units = _script_units(tree)
    holder = next((u for u in units if _start(u) <= finding.line <= (u.end_lineno or u.lineno)), None)
    if holder is None or isinstance(holder, _DEFINITIONS):
        return None
    bound = _bound(holder)
    for statement in units[units.index(holder) + 1 :]:
        if isinstance(statement, _DEFINITIONS):
            continue
        for call in (n for n in ast.walk(statement) if isinstance(n, ast.Call)):
            if _call_name(call) not in _SCRIPT_BUILTINS and any(isinstance(a, ast.Name) and a.id in bound for a in call.args):
                return call.lineno
    return None


def _lambda_caller(tree: ast.Module, index: "_Index", finding: Finding) -> Optional[int]:
    """For a DL701 finding in the lambda a top-level statement binds
    (`Variable = lambda *args: autograd.Variable(*args)`): the line of the
    first later top-level statement that calls it, itself or through the
    file's functions and methods, so the script runs the file's own calls
    of it. None otherwise."""
    if finding.code not in ("DL701", "DL702"):
        return None
    units = _script_units(tree)
    holder = next((u for u in units if _start(u) <= finding.line <= (u.end_lineno or u.lineno)), None)
    if not (isinstance(holder, ast.Assign) and isinstance(holder.value, ast.Lambda) and len(holder.targets) == 1 and isinstance(holder.targets[0], ast.Name)):
        return None
    callers = {holder.targets[0].id}
    methods: Set[str] = set()
    for _ in range(3):  # functions calling functions that call it
        for statement in tree.body:
            functions = [statement] if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
            if isinstance(statement, ast.ClassDef):
                functions = [m for m in statement.body if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef))]
            for function in functions:
                if _calls_any(function, callers, methods):
                    (methods if isinstance(statement, ast.ClassDef) else callers).add(function.name)
    later = units[units.index(holder) + 1 :]
    return next((_start(u) for u in later if not isinstance(u, _DEFINITIONS) and _calls_any(u, callers, methods)), None)


def _calls_any(node: ast.AST, functions: Set[str], methods: Set[str]) -> bool:
    """Whether `node` calls one of `functions` by name or one of `methods` on a value (`model.act(...)`)."""
    for call in ast.walk(node):
        if not isinstance(call, ast.Call):
            continue
        if isinstance(call.func, ast.Name) and call.func.id in functions:
            return True
        if isinstance(call.func, ast.Attribute) and call.func.attr in methods:
            return True
    return False


def _calling_loop(tree: ast.Module, finding: Finding) -> Optional[int]:
    """For a DL601 finding in a step function, the line of the loop that calls
    it, when that loop is outside the function (None otherwise)."""
    match = re.search(r"called in a loop on line (\d+)", finding.message) if finding.code == "DL601" else None
    if match is None:
        return None
    line = int(match.group(1))
    outer = _enclosing(tree.body, line)
    if outer is None or outer is _enclosing(tree.body, finding.line):
        return None
    return line


_OWN = object()  # marks a name of the file's own function or class among constants


def _literal(node: ast.expr, constants: Dict[str, object]):
    if isinstance(node, ast.Name) and node.id in constants:
        return node if constants[node.id] is _OWN else ast.Constant(constants[node.id])
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and constants.get(node.func.id) is _OWN:
        # An instance of the file's own class built from literals (`OnlineTripletLoss(1.0, AllTripletSelector())`).
        args = [_literal(a, constants) for a in node.args]
        keywords = [(k.arg, _literal(k.value, constants)) for k in node.keywords]
        if all(a is not None for a in args) and all(k is not None and v is not None for k, v in keywords):
            return ast.Call(node.func, args, [ast.keyword(k, v) for k, v in keywords])
        return None
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return node


def _strip_chain(expr: ast.expr) -> ast.expr:
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in _CHAINED:
        expr = expr.func.value
    return expr


def _hints(tree: ast.Module, index: _Index, top, target: dict, models: List[str]) -> dict:
    constants: Dict[str, object] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
            try:
                constants[statement.targets[0].id] = ast.literal_eval(statement.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                pass
    classes = set(index.classes)
    # A function or class of the file passed to a constructor (`MoCo(mlp_encoder)`)
    # is as good as a literal: the reproduction carries it.
    own = {n for n, bs in index.binders.items() if bs and all(isinstance(b, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) for b in bs)}
    constants.update({name: _OWN for name in own})
    ctor_calls: Dict[str, List[str]] = {}
    var_classes: Dict[str, str] = {}
    sizes: List[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in classes:
            args = [_literal(a, constants) for a in node.args]
            keywords = [(k.arg, _literal(k.value, constants)) for k in node.keywords]
            if all(a is not None for a in args) and all(k is not None and v is not None for k, v in keywords):
                call = ast.Call(node.func, args, [ast.keyword(k, v) for k, v in keywords])
                text = ast.unparse(call)
                found = ctor_calls.setdefault(node.func.id, [])
                if text not in found and len(found) < 3:
                    found.append(text)
                for keyword, value in keywords:
                    if any(w in keyword.lower() for w in _SIZE_WORDS):
                        _add_size(sizes, value)
    var_classes.update(_var_classes(tree, classes))
    for name in models:
        init = next((s for s in index.classes[name].body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        if init is None:
            continue
        positional = init.args.args[-len(init.args.defaults):] if init.args.defaults else []
        for arg, default in zip(positional, init.args.defaults):
            if any(w in arg.arg.lower() for w in _SIZE_WORDS):
                _add_size(sizes, default)
    param_classes = _param_classes(tree, top, target, var_classes, classes)
    callers = _method_callers(top, target, index) if target["kind"] == "method" and isinstance(top, ast.ClassDef) else []
    # Calls of the target method anywhere in the file: a run through one caller speaks for that one only.
    target_calls = sum(
        1 for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == target.get("function")
    ) if callers else 0
    return {
        "callers": callers,
        "target_calls": target_calls,
        "parser_defaults": _parser_defaults(tree),
        "parsed_as": _parsed_names(tree),
        "ctor_calls": ctor_calls,
        "var_classes": var_classes,
        "param_classes": param_classes,
        "root_classes": _roots(models, index),
        "sizes": sizes,
    }


_ARGPARSE_TYPES = {"int": int, "float": float, "str": str}


def _parser_defaults(tree: ast.Module) -> Dict[str, object]:
    """What `parse_args([])` gives each field of the file's argparse parser
    (`parser.add_argument("--lr", type=float, default=0.01)`): literal
    defaults only, as argparse converts them; a field whose default is not a
    literal is left out."""
    found: Dict[str, object] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _call_name(node) == "add_argument" and node.args):
            continue
        options = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        if len(options) != len(node.args) or not options[0].startswith("-"):
            continue  # a positional argument has no default without a command line
        dest = keywords.get("dest")
        if dest is not None:
            if not isinstance(dest, ast.Constant) or not isinstance(dest.value, str):
                continue
            name = dest.value
        else:
            longs = [o for o in options if o.startswith("--")]
            name = (longs[0] if longs else options[0]).lstrip("-").replace("-", "_")
        action = keywords.get("action")
        action = action.value if isinstance(action, ast.Constant) else None
        if "default" in keywords:
            try:
                value = ast.literal_eval(keywords["default"])
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
        elif action in ("store_true", "store_false"):
            value = action == "store_false"
        elif action in (None, "store", "append", "count", "extend"):
            value = None
        else:
            continue
        convert = keywords.get("type")
        if isinstance(value, str) and isinstance(convert, ast.Name) and convert.id in _ARGPARSE_TYPES:
            try:
                value = _ARGPARSE_TYPES[convert.id](value)  # argparse converts a string default
            except ValueError:
                continue
        found.setdefault(name, value)
    return found


def _settings_class(node: ast.ClassDef) -> bool:
    """A class that only holds settings: fields with values, no methods
    (`class Config: lr = 1e-3`, a dataclass of defaults)."""
    fields = [s for s in node.body if isinstance(s, (ast.Assign, ast.AnnAssign))]
    rest = [s for s in node.body if not isinstance(s, (ast.Assign, ast.AnnAssign, ast.Pass)) and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return bool(fields) and not rest and all(isinstance(b, ast.Name) and b.id == "object" for b in node.bases)


def _parsed_names(tree: ast.Module) -> List[str]:
    """The names the file binds the parser's result to (`opt = parser.parse_args()`)."""
    names: List[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and _call_name(node.value) in ("parse_args", "parse_known_args"):
            for target in node.targets:
                first = target.elts[0] if isinstance(target, ast.Tuple) and target.elts else target
                if isinstance(first, ast.Name) and first.id not in names:
                    names.append(first.id)
    return names


def _method_callers(top: ast.ClassDef, target: dict, index: "_Index") -> List[str]:
    """The other methods (not constructors) of the class or of its subclasses
    in the file that call the target method on `self` with arguments: they
    build what the program gives it."""
    family, changed = {top.name}, True
    while changed:
        grown = {name for name, node in index.classes.items() if set(_base_names(node)) & family}
        changed, family = not grown <= family, family | grown
    found = []
    for statement in [s for name in family for s in index.classes[name].body]:
        if not isinstance(statement, ast.FunctionDef) or statement.name in (target["function"], "__init__") or statement.name in found:
            continue
        for node in ast.walk(statement):
            func = node.func if isinstance(node, ast.Call) else None
            if (
                isinstance(func, ast.Attribute) and func.attr == target["function"] and isinstance(func.value, ast.Name)
                and func.value.id == "self" and (node.args or node.keywords or _fills_for(statement, top, target))
            ):
                found.append(statement.name)
                break
    return found


def _fills_for(caller: ast.FunctionDef, top: ast.ClassDef, target: dict) -> bool:
    """Whether `caller` fills a list the target method reads (`self.memory.append(...)`
    before `self.learn()`): the constructor leaves it empty, so only the caller's
    run gives the target what the program gives it."""
    method = next((s for s in top.body if isinstance(s, ast.FunctionDef) and s.name == target["function"]), None)
    if method is None:
        return False
    read = {
        n.attr for n in ast.walk(method)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self" and isinstance(n.ctx, ast.Load)
    }
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("append", "extend", "insert")
        and isinstance(n.func.value, ast.Attribute) and isinstance(n.func.value.value, ast.Name)
        and n.func.value.value.id == "self" and n.func.value.attr in read
        for n in ast.walk(caller)
    )


def _add_size(sizes: List[int], node) -> None:
    value = node.value if isinstance(node, ast.Constant) else None
    if isinstance(value, int) and not isinstance(value, bool) and 4 <= value <= 256 and value not in sizes:
        sizes.append(value)


def _param_classes(tree, top, target: dict, var_classes: Dict[str, str], classes: Set[str]) -> Dict[str, str]:
    """Parameter -> the file class of the argument passed for it in a call found in the file."""
    functions = []
    if target["kind"] == "function":
        functions.append((target["function"], top, False))
    elif target["kind"] == "method" and isinstance(top, ast.ClassDef):
        for statement in top.body:
            if isinstance(statement, ast.FunctionDef) and statement.name in (target["function"], "__init__"):
                name = top.name if statement.name == "__init__" else statement.name
                functions.append((name, statement, True))
    found: Dict[str, str] = {}
    for name, node, skip_self in functions:
        params = [a.arg for a in node.args.args][1 if skip_self else 0 :]
        for call in ast.walk(tree):
            if not isinstance(call, ast.Call):
                continue
            func = call.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if called != name:
                continue
            pairs = list(zip(params, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg]
            for param, arg in pairs:
                arg = _strip_chain(arg)
                if isinstance(arg, ast.Name) and arg.id in var_classes:
                    found.setdefault(param, var_classes[arg.id])
                elif isinstance(arg, ast.Call) and isinstance(arg.func, ast.Name) and arg.func.id in classes:
                    found.setdefault(param, arg.func.id)
    return found


def _call_text(tree: ast.Module, finding: Finding) -> Optional[str]:
    """The source of the call the finding points at (`model(images)`), shortened."""
    exact, widest = None, None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.lineno == finding.line and node.col_offset == finding.column - 1:
            if (node.end_lineno, node.end_col_offset) == (finding.end_line, finding.end_column - 1):
                exact = node
            if widest is None or (node.end_lineno, node.end_col_offset) > (widest.end_lineno, widest.end_col_offset):
                widest = node
    best = exact or widest
    if best is None:
        return None
    text = " ".join(ast.unparse(best).split())
    return text if len(text) <= 60 else text[:57] + "..."
