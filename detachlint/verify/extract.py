"""A finding's reproduction, cut from the user's file with `ast`.

The spec carries the file's own code as blocks with their original line
numbers: the import statements, the enclosing function or class, and the
module-level definitions those use, transitively. The file's top-level
script code (training loops, argparse, `if __name__ == "__main__":`) is never
part of it, except the straight-line statements a finding in script code
needs (`_script_slice`); a module-level assignment is carried only when it is a plain
definition (a constant, a logger, a named tuple), never when it loads,
downloads or builds something. Hints found elsewhere in the file go along:
constructor calls with literal arguments, which class a variable holds, the
sizes an input may need.
"""

from __future__ import annotations

import ast
from typing import Dict, Iterable, List, Optional, Set

from detachlint.finding import Finding

# Calls a module-level assignment may make and still count as a definition.
_DEFINITION_CALLS = {
    "getLogger", "get_logger", "namedtuple", "NamedTuple", "TypeVar", "dict", "list", "tuple", "set",
    "frozenset", "defaultdict", "OrderedDict", "partial", "compile", "device", "dtype", "field",
    "is_available", "Enum", "IntEnum", "getenv", "get", "object", "float", "int", "str", "bool",
    "Path", "range", "zip", "sqrt", "log", "exp", "pow", "finfo", "iinfo", "version", "parse", "make_dataclass",
    "ModuleType", "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Identity", "property", "staticmethod",
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
    top = _enclosing(tree.body, finding.line)
    index = _Index(tree)
    needed: List[ast.stmt] = []
    if isinstance(top, ast.ClassDef):
        method = _enclosing(top.body, finding.line)
        if isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            spec["target"] = {"kind": "method", "class": top.name, "function": method.name}
        else:
            spec["target"] = {"kind": "module", "class": top.name}
        needed.append(top)
    elif isinstance(top, (ast.FunctionDef, ast.AsyncFunctionDef)):
        spec["target"] = {"kind": "function", "function": top.name}
        needed.append(top)
    script = _script_slice(tree, index, top) if spec["target"]["kind"] == "module" and top is not None else None
    if script is not None:
        # Straight-line script code: its statements run as one function.
        spec["target"] = {"kind": "function", "function": SCRIPT_FUNCTION, "script": True}
        chosen = index.closure(script["definitions"])
        spec["blocks"] = [_block(statement, lines) for statement in chosen]
        spec["blocks"] += [dict(_block(statement, lines), script=True) for statement in script["statements"]]
        spec["unavailable"] = index.unavailable
    elif spec["target"]["kind"] != "module":
        models = _model_classes(tree, index)
        owner_is_module = isinstance(top, ast.ClassDef) and top.name in models
        if not owner_is_module:
            # A function or a plain class (a trainer) takes its model as an
            # argument: the file's own model classes are the candidates.
            needed.extend(index.classes[name] for name in _roots(models, index)[-3:])
        chosen = index.closure(needed)
        spec["blocks"] = [_block(statement, lines) for statement in chosen]
        spec["unavailable"] = index.unavailable
        spec["hints"] = _hints(tree, index, top, spec["target"], models)
    if spec["target"]["kind"] in ("function", "method") and not spec["target"].get("script"):
        site = _call_site(tree, index, spec["target"])
        if site is not None:
            # The file's own call of the target, with the statements that build its arguments.
            spec["call_site"] = {"call": ast.unparse(site["call"]), "line": site["call"].lineno, "others": site["others"]}
            known = {(b["line"], b["text"]) for b in spec["blocks"]}
            extra = index.closure(site["definitions"])
            spec["blocks"] += [b for b in map(lambda st: _block(st, lines), extra) if (b["line"], b["text"]) not in known]
            spec["blocks"] += [dict(_block(statement, lines), call_site=True) for statement in site["statements"]]
    switch = _script_grad_off(tree)
    if switch is not None:
        spec["hints"]["script_grad_off"] = switch
    spec["hints"]["call"] = _call_text(tree, finding)
    spec["hints"]["statement"] = _statement_text(tree, finding.line)
    return spec


SCRIPT_FUNCTION = "__detachlint_script__"
# Modules a script statement may call into; their loaders, savers and hubs excluded.
_SCRIPT_MODULES = {"torch", "numpy", "math"}
_SCRIPT_BUILTINS = {
    "print", "len", "range", "float", "int", "bool", "list", "tuple", "dict", "sum", "min", "max", "abs",
    "round", "zip", "enumerate", "isinstance", "sorted", "reversed", "all", "any",
}
# Calls that reach files, the network or other programs, by name.
_SCRIPT_UNSAFE = {"load", "save", "open", "urlopen", "system", "popen", "compile", "exec", "eval", "hub"}
_SCRIPT_UNSAFE_PREFIXES = ("load_", "save_", "download", "from_pretrained", "fetch")
_SCRIPT_LIMIT = 40
_DEFINITIONS = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _script_slice(tree: ast.Module, index: "_Index", top: ast.stmt) -> Optional[dict]:
    """For a finding in straight-line top-level code (`out = a.sigmoid()`,
    `c = out.data`, `c.zero_()`, `out.sum().backward()`): the statements it
    depends on and the later ones that use the same values, when every one of
    them only assigns or evaluates and calls nothing but torch, numpy, math,
    a few builtins, methods of those values and the file's own definitions.
    None when any of that does not hold: such script code never runs."""
    body = [s for s in tree.body if not _is_main_guard(s)]
    if top not in body or not _straight(top, index):
        return None
    position = body.index(top)
    chosen = {id(top): top}
    wanted = _loaded_names(top)
    for statement in reversed(body[:position]):
        bound = _bound(statement)
        if not bound & wanted or isinstance(statement, _DEFINITIONS):
            continue
        if not _straight(statement, index):
            return None
        chosen[id(statement)] = statement
        wanted |= _loaded_names(statement)
    values = set().union(*(_bound(s) for s in chosen.values()))
    for statement in body[position + 1 :]:
        if isinstance(statement, _DEFINITIONS) or not _loaded_names(statement) & values:
            continue
        if not _straight(statement, index):
            break
        chosen[id(statement)] = statement
        values |= _bound(statement)
    if len(chosen) > _SCRIPT_LIMIT:
        return None
    statements = sorted(chosen.values(), key=lambda s: s.lineno)
    bound_here = set().union(*(_bound(s) for s in statements))
    needed = set().union(*(_loaded_names(s) for s in statements)) - bound_here
    definitions = [b for name in sorted(needed) for b in index.binders.get(name, []) if _is_definition(b)]
    return {"statements": statements, "definitions": definitions}


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


def _call_site(tree: ast.Module, index: "_Index", target: dict) -> Optional[dict]:
    """A call of the finding's function (or of its method on an instance of its
    class) in the file's script code, whose arguments straight-line script
    statements build (`model = Net(4)`, `x = torch.randn(8, 4)`): the program's
    own inputs. None when the arguments need anything else to exist."""
    statements = list(_simple_statements(tree.body))
    # The target itself first, then the file's functions that call it (up to
    # three calls away): `train(...)` in the script reaches `eval_epoch`.
    for name in _callers(tree, target):
        wanted = dict(target, function=name, kind="function") if name != target["function"] else target
        for position, statement in enumerate(statements):
            if isinstance(statement, _COMPOUND):
                continue
            for call in ast.walk(statement):
                if not isinstance(call, ast.Call) or not _calls_target(call, wanted):
                    continue
                if wanted is not target and not (call.args or call.keywords):
                    continue  # `main()`: the whole program, not a call that builds the target's inputs
                site = _arguments_slice(statements[:position], call, index, wanted)
                if site is not None:
                    site["others"] = _other_calls(tree, target, call)
                    return site
    return None


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


def _other_calls(tree: ast.Module, target: dict, chosen: ast.Call) -> int:
    """Calls of the target or of the file's functions that reach it, besides `chosen`."""
    names = set(_callers(tree, target))
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node is not chosen:
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            count += called in names
    return count


def _callers(tree: ast.Module, target: dict, depth: int = 3) -> List[str]:
    """The target's name, then the top-level functions that call it, nearest first."""
    names = [target["function"]]
    if target["kind"] != "function":
        return names
    calls = {
        node.name: {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    frontier = [target["function"]]
    for _ in range(depth):
        frontier = [f for f, called in calls.items() if f not in names and called & set(frontier)]
        names += frontier
    return names


def _calls_target(call: ast.Call, target: dict) -> bool:
    func = call.func
    if target["kind"] == "function":
        return isinstance(func, ast.Name) and func.id == target["function"]
    return isinstance(func, ast.Attribute) and func.attr == target["function"] and isinstance(func.value, ast.Name)


def _arguments_slice(before: List[ast.stmt], call: ast.Call, index: "_Index", target: dict) -> Optional[dict]:
    if any(not _script_call(inner, index) for inner in ast.walk(call) if isinstance(inner, ast.Call) and inner is not call):
        return None
    wanted = _loaded_names(call)
    chosen: List[ast.stmt] = []
    receiver_built = target["kind"] == "function"
    for statement in reversed(before):
        bound = _header_bound(statement) if isinstance(statement, _COMPOUND) else _bound(statement)
        if not bound & wanted:
            continue
        if not _straight(statement, index):
            return None
        chosen.append(statement)
        wanted |= _loaded_names(statement)
        if not receiver_built and isinstance(call.func, ast.Attribute) and call.func.value.id in bound:
            value = getattr(statement, "value", None)
            receiver_built = isinstance(value, ast.Call) and _call_name(value) == target.get("class")
    if not receiver_built or len(chosen) > _SCRIPT_LIMIT:
        return None
    chosen.reverse()
    bound_here = set().union(*(_bound(s) for s in chosen)) if chosen else set()
    needed = (set().union(*(_loaded_names(s) for s in chosen)) if chosen else set()) | _loaded_names(call)
    definitions = [b for name in sorted(needed - bound_here) for b in index.binders.get(name, []) if _is_definition(b)]
    if any(name not in bound_here and not index.binders.get(name) and name not in _SCRIPT_BUILTINS for name in _loaded_names(call)):
        return None
    return {"statements": chosen, "call": call, "definitions": definitions}


def _straight(statement: ast.stmt, index: "_Index") -> bool:
    if not isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)):
        return False
    for node in ast.walk(statement):
        if isinstance(node, (ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
            return False
        if isinstance(node, ast.Call) and not _script_call(node, index):
            return False
    return True


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
    start = _start(statement)
    text = "".join(lines[start - 1 : statement.end_lineno])
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
            inner.extend(handler.body)
        inner.extend(getattr(statement, "finalbody", []))
        return all(_is_definition(s) or isinstance(s, (ast.Pass, ast.Expr)) and _harmless(s) for s in inner)
    return False


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
        for statement in tree.body:
            if isinstance(statement, ast.ImportFrom) and statement.module == "__future__":
                continue
            if _is_main_guard(statement):
                continue
            if isinstance(statement, ast.ClassDef):
                self.classes[statement.name] = statement
            for name in _bound(statement):
                self.binders.setdefault(name, []).append(statement)

    def closure(self, roots: List[ast.stmt]) -> List[ast.stmt]:
        """The roots and every definition they use, transitively, in file order."""
        chosen: List[ast.stmt] = []
        seen_ids: Set[int] = set()
        todo = list(roots)
        while todo:
            statement = todo.pop()
            if id(statement) in seen_ids:
                continue
            seen_ids.add(id(statement))
            chosen.append(statement)
            for name in _loaded_names(statement):
                for binder in self.binders.get(name, []):
                    if id(binder) in seen_ids:
                        continue
                    if _is_definition(binder):
                        todo.append(binder)
                    else:
                        self.unavailable.setdefault(
                            name,
                            f"is module-level script code (line {binder.lineno}), which the verifier never runs",
                        )
        order = {id(s): i for i, s in enumerate(self.statements)}
        return sorted(chosen, key=lambda s: order.get(id(s), 0))


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


def _literal(node: ast.expr, constants: Dict[str, object]):
    if isinstance(node, ast.Name) and node.id in constants:
        return ast.Constant(constants[node.id])
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
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            value = _strip_chain(node.value)
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in classes:
                key = node.targets[0]
                if isinstance(key, ast.Name):
                    var_classes.setdefault(key.id, value.func.id)
                elif isinstance(key, ast.Attribute):
                    var_classes.setdefault(key.attr, value.func.id)
    for name in models:
        init = next((s for s in index.classes[name].body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        if init is None:
            continue
        positional = init.args.args[-len(init.args.defaults):] if init.args.defaults else []
        for arg, default in zip(positional, init.args.defaults):
            if any(w in arg.arg.lower() for w in _SIZE_WORDS):
                _add_size(sizes, default)
    param_classes = _param_classes(tree, top, target, var_classes, classes)
    return {
        "ctor_calls": ctor_calls,
        "var_classes": var_classes,
        "param_classes": param_classes,
        "root_classes": _roots(models, index),
        "sizes": sizes,
    }


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
