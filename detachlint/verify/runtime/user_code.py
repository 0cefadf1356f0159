"""The user's code: rebuild it from the spec's blocks, find an entry, run it.

`UserModule` executes the spec's blocks (the file's imports, the enclosing
function or class, the module-level definitions it uses) in a fresh module;
a block that fails leaves its names bound to `Missing`. `entry_point` picks
what to call (the file's own call, the enclosing function, a method on an
instance the constructor built) and `attempt` runs it once under a plan,
with the finding's statement marked (and rewritten or observed, as a probe
asks). `find_working` tries plans until one reaches the finding's line.
"""

import ast
import contextlib
import inspect
import os
import re
import signal
import sys
import textwrap
import threading
import time
import types

import torch
from torch import nn

from detachlint.verify.runtime.standins import (
    AutoConfig,
    USED_NOW,
    exec_stubbing,
    forget_stubs,
    Enough,
    Inconclusive,
    Loader,
    Missing,
    Passthrough,
    Sink,
    ResourceLimit,
    SYNTHESIZED,
    MADE,
    MADE_AT_ENTRY,
    CONFIGS,
    cpu_only,
    is_memory_error,
    parse_at,
    seed_everything,
    walk,
)
from detachlint.verify.runtime.environments import make_environment
from detachlint.verify.runtime.synthesis import Plan, Synth, forget_analyses, locate, loop_targets, methods_of
from detachlint.verify.runtime.observe import BASIS, describe_error, passed_through, statement_lines


MAX_ATTEMPTS = 8


ANNOTATIONS = __import__("__future__").annotations.compiler_flag


# ---------------------------------------------------------------------------
# The user's code: blocks in, a fresh module out.


_COUNTER = [0]


def _bound_names(statement):
    names = []
    for node in walk(statement) if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else [statement]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.alias):
            names.append((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)
    return names


SCRIPT_FUNCTION = "__detachlint_script__"


CALL_SITE_FUNCTION = "__detachlint_call_site__"


def parse_blocks(spec):
    """[(block, [statements with original line numbers])]; the blocks marked
    `script` (straight-line top-level code) become one function's body, and
    those marked `call_site` another that ends by making the file's own call."""
    parsed, script, site = [], [], []
    for block in spec["blocks"]:
        tree = parse_at(textwrap.dedent(block["text"]), block["line"])
        if block.get("script") and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in tree.body):
            # An import in the `__main__` block: a block of its own, which leaves
            # its names missing when it fails, as the file's other imports do.
            parsed.append((block, tree.body))
        elif block.get("script"):
            script.extend(tree.body)
        elif block.get("call_site"):
            site.extend(tree.body)
        elif block.get("imports"):
            # Imports guarded by a handler that only reports their failure (the
            # extraction's word): each on its own, as a plain import, so one
            # that fails leaves only its own names missing.
            parsed.extend((block, [statement]) for statement in tree.body[0].body)
        else:
            parsed.append((block, tree.body))
    if script:
        # Script variables stay module globals, as in the program: the file's
        # functions read them.
        script = [_PlainAssignments().visit(statement) if _annotates(statement) else statement for statement in script]
        names = sorted(set(_bound_names_of(script)))
        if names:
            # On line 0: no line of the file holds it (`locate` finds the user's statements).
            script.insert(0, ast.Global(names=names, lineno=0, end_lineno=0, col_offset=0, end_col_offset=0))
        parsed.append(_as_function(SCRIPT_FUNCTION, script))
    if spec.get("call_site"):
        call = ast.parse(spec["call_site"]["call"], mode="eval").body
        ast.increment_lineno(call, spec["call_site"]["line"] - 1)
        returned = ast.copy_location(ast.Return(call), call)
        parsed.append(_as_function(CALL_SITE_FUNCTION, site + [returned]))
    return parsed


def _annotates(statement):
    """Whether an annotated assignment is anywhere in `statement`: the
    others `_PlainAssignments` would leave as they are, after a slower walk."""
    return any(isinstance(node, ast.AnnAssign) for node in walk(statement))


class _PlainAssignments(ast.NodeTransformer):
    """`x: T = v` as `x = v` (and a bare `x: T` as nothing): a name declared
    `global` cannot be annotated. Nested functions and classes keep theirs."""

    def visit_AnnAssign(self, node):
        if node.value is None or not node.simple:
            return ast.copy_location(ast.Pass(), node) if node.value is None else node
        return ast.copy_location(ast.Assign(targets=[node.target], value=node.value), node)

    def generic_visit(self, node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return node
        return super().generic_visit(node)


def _as_function(name, body):
    function = ast.FunctionDef(
        name=name, args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=body, decorator_list=[], returns=None, type_comment=None, type_params=[],
    )
    ast.copy_location(function, body[0])
    function.end_lineno = body[-1].end_lineno
    return {"line": body[0].lineno, "text": "", "script": True}, [ast.fix_missing_locations(function)]


def _project_class_ast(klass, project):
    """The class statement of `klass` when a module under the project's
    folders defines it (`from models import ConvNet`), read from its source."""
    module = sys.modules.get(getattr(klass, "__module__", None) or "")
    path = getattr(module, "__file__", None) or ""
    if not path.endswith(".py") or not any(path.startswith(root + os.sep) for root in project.get("paths", [])):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
    except (OSError, SyntaxError, ValueError):
        return None
    return next((node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == klass.__name__), None)


class UserModule:
    """The reproduction's module: the blocks executed one by one. A block
    that fails (an import that is not installed, a class whose base is
    missing) leaves its names bound to `Missing`, and the others go on."""

    def __init__(self, spec, transform=None, preset=None):
        self.spec = spec
        self.path = spec["path"]
        self.used_missing = {}
        USED_NOW[0] = self.used_missing
        self.stubbed = []  # modules imported with stubbed packages, forgotten on close
        self.failed = {}
        self.forced = []  # lines of `if`s a transform forced
        self.blocks = parse_blocks(spec)
        if transform is not None:
            transform(self)
        _COUNTER[0] += 1
        self.name = f"detachlint_repro_{_COUNTER[0]}"
        self.module = types.ModuleType(self.name)
        self.module.__file__ = self.path
        self.ns = self.module.__dict__
        # The reproduction's own hooks, there before any block runs: a marker
        # inside a class body runs when the class is defined.
        self.ns.update(preset or {})
        sys.modules[self.name] = self.module
        # The project's own modules import as they do when the file runs:
        # they are the user's code too (read, and run confined like it).
        project = spec.get("project") or {}
        self.added_paths = [p for p in project.get("paths", []) if p not in sys.path]
        sys.path[:0] = self.added_paths
        if project.get("package"):
            self.ns["__package__"] = project["package"]
        for block, statements in self.blocks:
            code = compile(ast.Module(body=statements, type_ignores=[]), self.path, "exec", flags=ANNOTATIONS, dont_inherit=True)
            try:
                # A project module importing a package that is not installed runs with it stubbed.
                self.stubbed += exec_stubbing(code, self.ns, statements, self.added_paths + [p for p in project.get("paths", []) if p not in self.added_paths])
            except Exception as error:  # noqa: BLE001 - any failure only makes names missing
                reason = _missing_reason(block, error)
                for name in _bound_names_of(statements):
                    self.failed[name] = reason
                    self.ns[name] = Missing(name, reason, self.used_missing)
        for name, reason in spec.get("unavailable", {}).items():
            self.ns.setdefault(name, Missing(name, reason, self.used_missing))
        for name in ("tqdm", "trange", "track"):
            if isinstance(self.ns.get(name), Missing):
                # Progress bars only wrap what they are given.
                self.ns[name] = Passthrough(range if name == "trange" else None)

    def close(self):
        sys.modules.pop(self.name, None)
        if getattr(self, "stubbed", None):
            forget_stubs(self.stubbed)
        for path in getattr(self, "added_paths", []):
            if path in sys.path:
                sys.path.remove(path)

    def find_class(self, name):
        for _, statements in self.blocks:
            for statement in statements:
                if isinstance(statement, ast.ClassDef) and statement.name == name:
                    return statement
        return None

    def find_function(self, name, class_name=None):
        if class_name:
            owner = self.find_class(class_name)
            statements = owner.body if owner is not None else []
        else:
            statements = [s for _, body in self.blocks for s in body]
        for statement in statements:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name == name:
                return statement
        return None

    def class_ast_of(self, obj):
        """The class statement of an object's class when the user's file, or a
        module of the user's project, defines it."""
        for klass in type(obj).__mro__:
            if getattr(klass, "__module__", None) == self.name:
                node = self.find_class(klass.__name__)
                if node is not None:
                    return node
            node = _project_class_ast(klass, self.spec.get("project") or {})
            if node is not None:
                return node
        return None

    def class_ast_of_type(self, cls):
        """The class statement the file has for `cls` itself."""
        return self.find_class(cls.__name__) if getattr(cls, "__module__", None) == self.name else None

    def module_classes(self):
        """The file's nn.Module subclasses with a forward, in file order."""
        found = []
        for _, statements in self.blocks:
            for statement in statements:
                if isinstance(statement, ast.ClassDef):
                    value = self.ns.get(statement.name)
                    if isinstance(value, type) and issubclass(value, nn.Module) and "forward" in methods_of(statement):
                        found.append(statement.name)
        return found


def _bound_names_of(statements):
    names = []
    for statement in statements:
        names.extend(_bound_names(statement))
    return names


def _missing_reason(block, error):
    if isinstance(error, ImportError):
        module = getattr(error, "name", None) or str(error)
        relative = re.match(r"\s*from\s+(\.+[\w.]*)\s+import", block["text"])
        if relative:
            return f"comes from `from {relative.group(1)} import ...`, a relative import the reproduction does not carry"
        return f"could not be imported (`{module}` is not installed)"
    return f"could not be defined ({type(error).__name__}: {error})"


# ---------------------------------------------------------------------------
# Running the user's code.


class Attempt:
    """One run of the reproduction under one plan."""

    def __init__(self):
        self.hits = 0
        self.error = None
        self.caught = None  # an error the finding's statement raised that the program then caught
        self.result = None
        self.finished = False
        self.synth = None
        self.user = None
        self.entry = None
        self.through = None  # the file's call of a caller of the target, when that is the entry
        self.forced = []
        self.grad_off_line = None  # the line that asks for autograd off (or the call that runs it so), which the run honoured
        # What a script's rewritten lines did (`_script_helpers`): data
        # synthesized, calls skipped, loops stopped early, loggers discarded.
        self.script = {"data": {}, "fields": [], "envs": {}, "skipped": [], "loops": {}, "sinks": [], "argv": False}

    @property
    def inputs(self):
        """What the script's run was given or spared, for the evidence: its
        inputs and its output, never a part of its logic (so not a stand-in)."""
        script, parts = self.script, []
        if script["data"]:
            counts = sorted(set(script["data"].values()))
            names = ", ".join(f"`{n}`" for n in script["data"])
            count = counts[0] if len(counts) == 1 else "a few"
            parts.append(f"with {count} synthesized batches for {names}")
        if script["fields"]:
            names = ", ".join(f"`{n}`" for n in script["fields"])
            parts.append(f"with synthesized samples for {names}")
        for env_id, spaces in script["envs"].items():
            parts.append(f"with the environment `{env_id}` synthesized with its {spaces}")
        if script["argv"]:
            parts.append("with the argument defaults of the file's parser")
        for line, cap in sorted(script["loops"].items()):
            parts.append(f"the loop on line {line} stopped after {cap} iterations")
        if script["skipped"]:
            lines = ", ".join(str(n) for n in sorted(set(script["skipped"])))
            parts.append(f"its file, network or terminal calls skipped (line {lines})")
        if script["sinks"]:
            parts.append("logging to " + ", ".join(f"`{n}`" for n in script["sinks"]) + " discarded")
        for name, method in getattr(self.synth, "attribute_inputs", []):
            parts.append(f"with a synthesized batch for `self.{name}`, which `{method}` sets from its data")
        return parts


def tested_grad_mode(test):
    """The grad mode in which an `if` on `test` takes its body: True for
    `torch.is_grad_enabled()`, False for `not torch.is_grad_enabled()`;
    None when the test does not read the grad mode."""
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    inner = test.operand if negated else test
    if isinstance(inner, ast.Call) and not inner.args and ast.unparse(inner.func).split(".")[-1] == "is_grad_enabled":
        return not negated
    return None


def _stops_unless_grad_off(statement):
    """`if torch.is_grad_enabled(): raise ...` or `assert not torch.is_grad_enabled()`."""
    if isinstance(statement, ast.If) and not statement.orelse and isinstance(statement.body[-1], ast.Raise):
        return tested_grad_mode(statement.test) is True
    return isinstance(statement, ast.Assert) and tested_grad_mode(statement.test) is False


def grad_off_required(spec):
    """The line that makes the finding's line run only with autograd off: an
    `if` on the way to it that tests `torch.is_grad_enabled()`, or a guard
    before it that stops otherwise. The program runs it that way and no
    other, so the reproduction does too (under `torch.no_grad()`); None when
    nothing asks for it. Else the place where the finding says the
    function is called with autograd off (`in train.py (line 40)`), which
    the reproduction honours the same way."""
    called = spec.get("hints", {}).get("called_with_grad_off")
    for _, statements in parse_blocks(_blocks_around(spec, spec["line"])):
        root = ast.Module(body=statements, type_ignores=[])
        located = locate(root, spec["line"])
        if located is None:
            continue
        _, _, statement, path = located
        children = [node for node, _ in path[1:]] + [statement]
        for (ancestor, field), child in zip(path, children):
            if isinstance(ancestor, ast.If) and field in ("body", "orelse"):
                mode = tested_grad_mode(ancestor.test)
                if mode is not None and mode == (field == "orelse"):
                    return ancestor.lineno
            body = getattr(ancestor, field)
            for earlier in body[: body.index(child)] if child in body else ():
                if _stops_unless_grad_off(earlier):
                    return earlier.lineno
        return called
    return called


def _blocks_around(spec, line):
    """`spec` with only the blocks whose statements can hold `line`: those
    that span it, and the script's (or the call site's) blocks all together
    when one of them does, as `parse_blocks` joins them into one body."""

    def spans(block):
        return block["line"] <= line <= block["line"] + block["text"].count("\n")

    joined = [kind for kind in ("script", "call_site") if any(spans(b) for b in spec["blocks"] if b.get(kind))]
    blocks = [b for b in spec["blocks"] if spans(b) or any(b.get(kind) for kind in joined)]
    return {**spec, "blocks": blocks}


def _statement_transform(spec, rewrite=None, force=False, after=None):
    """A transform for UserModule: mark the finding's statement (and rewrite it,
    force the `if`s around it, or add an observer after it)."""
    line = spec["line"]

    def transform(user):
        for _, statements in user.blocks:
            root = ast.Module(body=statements, type_ignores=[])
            located = locate(root, line)
            if located is None:
                continue
            body, index, statement, path = located
            replacement = rewrite(statement) if rewrite else [statement]
            marker = ast.parse("__dl_hit__()").body[0]
            holder = _lambda_holding(replacement, spec)
            if holder is not None:
                # A finding inside a lambda runs when the lambda is called, not when it is bound.
                holder.body = _after_hit(marker.value, holder.body)
                new = list(replacement)
            else:
                new = [marker] + replacement
            if after is not None:
                new += after(statement)
            guard = ast.parse("try:\n    pass\nexcept BaseException as __dl_error__:\n    __dl_raised__(__dl_error__)\n    raise").body[0]
            for node in new + [guard]:
                if node is statement:
                    continue
                # Inserted and rewritten code reports the finding's line.
                for child in walk(node):
                    if "lineno" in child._attributes:
                        child.lineno = child.end_lineno = statement.lineno
                        child.col_offset = child.end_col_offset = 0
            if not any(isinstance(node, (ast.Global, ast.Nonlocal)) for node in new):
                # An error the statement raises is kept even when the program
                # catches it (`except RuntimeError as e: print(e)`).
                guard.body = new[1:] if new and new[0] is marker else new
                new = ([marker] if new and new[0] is marker else []) + [guard]
            body[index : index + 1] = new
            if force:
                for ancestor, field in path:
                    # A test of the grad mode is taken as the program takes it.
                    if isinstance(ancestor, ast.If) and tested_grad_mode(ancestor.test) is None:
                        user.forced.append(ancestor.lineno)
                        ancestor.test = ast.copy_location(ast.Constant(field == "body"), ancestor.test)
            return

    return transform


def _after_hit(hit, body):
    """`(hit, body)[1]`, on the body's position."""
    for child in ast.walk(hit):
        ast.copy_location(child, body)
    pair = ast.copy_location(ast.Tuple([hit, body], ast.Load()), body)
    return ast.copy_location(ast.Subscript(pair, ast.copy_location(ast.Constant(1), body), ast.Load()), body)


def _lambda_holding(statements, spec):
    """The innermost lambda in `statements` whose text holds the finding's position, or None."""
    line, column = spec["line"], spec.get("column", 1) - 1
    found = None
    for statement in statements:
        for node in ast.walk(statement):
            if not isinstance(node, ast.Lambda) or getattr(node, "end_lineno", None) is None:
                continue
            after_start = (line, column) >= (node.lineno, node.col_offset)
            before_end = (line, column) < (node.end_lineno, node.end_col_offset)
            if after_start and before_end and (found is None or (node.lineno, node.col_offset) > (found.lineno, found.col_offset)):
                found = node
    return found


def entry_point(spec, user, synth):
    """What to call: (callable, description). A method of an nn.Module that
    `forward` reaches runs through the module; other methods on an instance
    built from the constructor; functions with synthesized arguments."""
    target = spec["target"]
    if target["kind"] == "module":
        raise Inconclusive("the code is top-level script code, which the verifier never runs")
    if synth.plan.call_site and callable(user.ns.get(CALL_SITE_FUNCTION)):
        # The file's own call, with the arguments its script code builds; the
        # script variables the target reads are stood in as when it is called
        # alone, unless the entry is the script itself, which binds them.
        if not spec["call_site"].get("script"):
            _stand_in_globals(spec, user, synth, _target_node(user, target))
        function = user.ns[CALL_SITE_FUNCTION]
        described = spec["call_site"].get("described") or f"`{spec['call_site']['call']}` (line {spec['call_site']['line']})"
        return function, described
    ns = user.ns
    if target.get("class"):
        cls = ns.get(target["class"])
        if not isinstance(cls, type):
            raise Inconclusive(f"class `{target['class']}` {user.failed.get(target['class'], 'could not be defined')}")
        node = user.find_class(target["class"])
        methods = methods_of(node)
        method = target["function"]
        owner = _caller_owner(user, cls, synth.plan.caller)
        if owner is not None:
            # The method of the class (or of a subclass) that calls the target.
            cls, method = owner, synth.plan.caller
            methods = dict(methods, **methods_of(user.class_ast_of_type(owner) or node))
        _stand_in_globals(spec, user, synth, methods[method])
        hooked = _hooking_model(user, synth, cls, methods, method) if owner is None else None
        if hooked is not None:
            # A hook's method runs as the program runs it: inside the forward of the model that registers it.
            model, model_node = hooked
            synth.modules[""] = model
            signature = inspect.signature(type(model).forward)
            args, kwargs = synth.arguments(signature, methods_of(model_node).get("forward"), {"self": model}, skip_self=True)
            return (lambda: model(*args, **kwargs)), f"`{type(model).__name__}.forward`, which runs the `{cls.__name__}` hook"
        instance = synth.construct(_concrete_class(user, cls, user.class_ast_of_type(cls) or node, method))
        env = {"self": instance}
        if isinstance(instance, nn.Module):
            synth.modules[""] = instance
        else:
            _fill_attributes(instance, methods, method, synth)
            for key, value in vars(instance).items():
                if isinstance(value, nn.Module):
                    synth.modules.setdefault(key, value)
        if isinstance(instance, nn.Module) and spec["code"] in ("DL101", "DL201") and method in _reached_from_forward(methods):
            forward = methods["forward"]
            signature = inspect.signature(type(instance).forward)
            args, kwargs = synth.arguments(signature, forward, env, skip_self=True)
            return (lambda: instance(*args, **kwargs)), f"`{target['class']}.forward`"
        function = getattr(instance, method)
        signature = inspect.signature(function)
        args, kwargs = synth.arguments(signature, methods[method], env, skip_self=False)
        return (lambda: function(*args, **kwargs)), f"`{owner.__name__ if owner else target['class']}.{method}`"
    function = ns.get(target["function"])
    if not callable(function):
        raise Inconclusive(f"`{target['function']}` {user.failed.get(target['function'], 'could not be defined')}")
    node = user.find_function(target["function"])
    _stand_in_globals(spec, user, synth, node)
    signature = inspect.signature(function)
    args, kwargs = synth.arguments(signature, node, {}, skip_self=False)
    described = "the top-level statements it uses" if target.get("script") else f"`{target['function']}`"
    return (lambda: function(*args, **kwargs)), described


def _abstract_methods(node):
    """Methods a class leaves to its subclasses: a body that only raises
    `NotImplementedError`, or one marked `@abstractmethod`."""
    found = set()
    for name, method in methods_of(node).items():
        body = [s for s in method.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        raises = len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.unparse(body[0].exc or ast.Constant(None))
        marked = any(ast.unparse(d).split(".")[-1] == "abstractmethod" for d in method.decorator_list)
        if raises or marked:
            found.add(name)
    return found


_HOOK_REGISTRATIONS = {"register_forward_pre_hook", "register_forward_hook"}


def _hooking_model(user, synth, cls, methods, method):
    """(model, its class statement) when `method` belongs to a hook class
    (`__call__(self, module, inputs)` reaching it) that a model of the file
    registers as it is built (`module.register_forward_pre_hook(fn)`); None otherwise."""
    if issubclass(cls, nn.Module) or "__call__" not in methods or method not in _reached_from(methods, "__call__"):
        return None
    registers = any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _HOOK_REGISTRATIONS
        for _, statements in user.blocks for statement in statements for n in walk(statement)
    )
    if not registers:
        return None
    classes = user.module_classes()
    roots = [c for c in synth.hints.get("root_classes", classes) if c in classes]
    for name in roots[-3:]:
        try:
            model = synth.construct(user.ns[name])
        except Exception:  # noqa: BLE001 - one the synthesized arguments cannot build
            continue
        hooks = [h for m in model.modules() for h in list(m._forward_pre_hooks.values()) + list(m._forward_hooks.values())]
        if any(isinstance(h, cls) and getattr(type(h), method, None) is getattr(cls, method, None) for h in hooks):
            return model, user.find_class(name)
    return None


def _target_node(user, target):
    """The target's function, or its method in the file's class; None when the blocks lack it."""
    if not target.get("class"):
        return user.find_function(target["function"])
    node = user.find_class(target["class"])
    return methods_of(node).get(target["function"]) if node is not None else None


def _caller_owner(user, cls, caller):
    """The class of the file, `cls` or a subclass, that defines `caller`; None when none does."""
    if not caller:
        return None
    for _, statements in user.blocks:
        for statement in statements:
            candidate = user.ns.get(statement.name) if isinstance(statement, ast.ClassDef) else None
            if isinstance(candidate, type) and issubclass(candidate, cls) and caller in methods_of(statement):
                return candidate
    return None


def _concrete_class(user, cls, node, method):
    """The class to build for a method of `cls`: `cls` itself, or, when `cls`
    leaves methods to its subclasses (`forward` raising NotImplementedError),
    the file's first subclass that provides them and inherits `method` as
    written: the program only ever runs it on such an instance."""
    abstract = _abstract_methods(node)
    if not abstract:
        return cls
    for _, statements in user.blocks:
        for statement in statements:
            candidate = user.ns.get(statement.name) if isinstance(statement, ast.ClassDef) else None
            if not isinstance(candidate, type) or candidate is cls or not issubclass(candidate, cls):
                continue
            provided = set().union(*(set(vars(k)) for k in candidate.__mro__[: candidate.__mro__.index(cls)]))
            if abstract <= provided and method not in provided:
                return candidate
    return cls


# Roles worth standing in for when a module-level script variable holds them.
_GLOBAL_ROLES = {"model", "loader", "optimizer", "criterion", "config", "device", "sink", "scheduler", "dtype"}


_TENSOR_TYPES = {"Tensor": "FloatTensor", "FloatTensor": "FloatTensor", "LongTensor": "LongTensor", "ByteTensor": "ByteTensor"}


def _stand_in_globals(spec, user, synth, function_ast):
    """Module-level script variables the function reads (`model = Net()` at the
    bottom of a script, `opt = parser.parse_args()`): never run, but a
    stand-in chosen by name and use takes their place."""
    if function_ast is None:
        return
    loaded = {n.id for n in walk(function_ast) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    for name in sorted((loaded - _local_names(function_ast)) & set(spec.get("unavailable", {}))):
        if name in _TENSOR_TYPES:
            user.ns[name] = getattr(torch, _TENSOR_TYPES[name])
            continue
        role = synth.role(name, function_ast)
        if role not in _GLOBAL_ROLES:
            continue
        parameter = inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        try:
            user.ns[name] = synth.value_for(parameter, function_ast, {}, constructor=False)
        except Exception:
            continue
        if role == "loader" and name in synth.hints.get("data_globals", ()):
            # The program's data (read from files): synthesized batches are its
            # input, as a script's data source's are, not a stand-in.
            synth.data_globals.append(name)
            continue
        if isinstance(user.ns[name], AutoConfig) and user.ns[name]._dl_source:
            # The parser's own defaults: the program's values; a field they
            # lack is made up, and then a stand-in (`config_notes`).
            object.__setattr__(user.ns[name], "_dl_strict", True)
            continue
        synth.globals_stood_in.append(name)
        if isinstance(user.ns[name], nn.Module):
            synth.modules.setdefault(name, user.ns[name])


def _local_names(function_ast):
    """Names the function binds itself (its parameters, assignments, loop
    targets, imports): they shadow a module global of the same name, which
    the function never reads."""
    if not isinstance(function_ast, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        return set()
    declared, local = set(), set()
    # One walk: each kind of node below adds to one set only.
    for node in walk(function_ast):
        if isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        elif isinstance(node, ast.arg):
            local.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            local.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            local.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            local.add(node.name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not function_ast:
            local.add(node.name)
    return local - declared


class _SelfToName(ast.NodeTransformer):
    def visit_Attribute(self, node):
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            return ast.copy_location(ast.Name(node.attr, node.ctx), node)
        return self.generic_visit(node)


def _fill_attributes(instance, methods, method, synth):
    """Attributes the method reads that the constructor did not set (a
    trainer whose `fit` builds `self.network`): stand-ins by name and use."""
    node = methods.get(method)
    if node is None:
        return
    attributes = {
        n.attr
        for n in walk(node)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self" and isinstance(n.ctx, ast.Load)
    }
    reached = _reached_from(methods, method)
    read = {
        n.attr
        for m in reached for n in walk(methods[m])
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self" and isinstance(n.ctx, ast.Load)
    }
    unset = sorted(a for a in read if a not in methods and not _has(instance, a))
    if unset:
        _run_setters(instance, methods, reached, unset)
    missing = sorted(a for a in attributes if a not in methods and not _has(instance, a))
    fed = _fed_attributes(methods, method, instance, attributes)
    if not missing and not fed:
        return
    plain = _SelfToName().visit(_copy_function(node))
    for name in fed:
        # A batch the class's own loop stores (`for data in loader: self.data = data`): an input, synthesized.
        parameter = inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        try:
            setattr(instance, name, synth.value_for(parameter, plain, dict(vars(instance)), constructor=False))
        except Exception:  # noqa: BLE001 - left as the constructor set it
            continue
        synth.attribute_inputs.append((name, fed[name]))
    for name in missing:
        parameter = inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        try:
            value = synth.value_for(parameter, plain, dict(vars(instance)), constructor=False)
            setattr(instance, name, value)
        except Exception:
            continue
        synth.attributes_stood_in.append(name)


def _fed_attributes(methods, method, instance, attributes):
    """{attribute: method}: attributes `method` reads that the constructor
    left None and that another method of the class sets, inside a loop over
    one of its parameters, from the loop's items (`for data in loader:
    self.data = data.float()`): the batches the program feeds in."""
    fed = {}
    for name, node in methods.items():
        if name == method or not isinstance(node, ast.FunctionDef):
            continue
        params = {a.arg for a in node.args.args[1:]}
        for loop in walk(node):
            if not isinstance(loop, ast.For) or not (isinstance(loop.iter, ast.Name) and loop.iter.id in params):
                continue
            items = {n.id for n in walk(loop.target) if isinstance(n, ast.Name)}
            for statement in walk(loop):
                if not isinstance(statement, ast.Assign) or not {n.id for n in walk(statement.value) if isinstance(n, ast.Name)} & items:
                    continue
                for target in statement.targets:
                    if (
                        isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self"
                        and target.attr in attributes and getattr(instance, target.attr, 0) is None
                    ):
                        fed.setdefault(target.attr, name)
    return fed


def _reached_from(methods, method):
    """`method` and the methods of its class it calls, transitively."""
    reached, todo = {method}, [method]
    while todo:
        for node in walk(methods[todo.pop()]):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr in methods and node.attr not in reached:
                reached.add(node.attr)
                todo.append(node.attr)
    return reached


def _run_setters(instance, methods, reached, missing):
    """The class's own methods that set what the target reads (`initialize()`
    building `self.module_`), run first as the program runs them: only those
    the target does not reach, that take no arguments and train nothing."""
    for name, node in methods.items():
        if name in reached or name.startswith("__") or not isinstance(node, ast.FunctionDef):
            continue
        arguments = node.args
        required = len(arguments.posonlyargs + arguments.args) - len(arguments.defaults)
        if required != 1 or [d for d in arguments.kw_defaults if d is None]:
            continue
        sets = {
            t.attr for n in walk(node) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
        }
        trains = any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and (n.func.attr in ("backward", "step") or n.func.attr in reached)
            for called in _reached_from(methods, name) for n in walk(methods[called])
        )
        if not sets & set(missing) or trains:
            continue
        try:
            getattr(instance, name)()
        except Exception:  # noqa: BLE001 - what it could not set is stood in
            continue


def _has(instance, name):
    try:
        getattr(instance, name)
    except Exception:
        return False
    return True


def _copy_function(node):
    copy = ast.parse(ast.unparse(node)).body[0]
    return copy


def _reached_from_forward(methods):
    if "forward" not in methods:
        return set()
    reached, todo = {"forward"}, ["forward"]
    while todo:
        for node in walk(methods[todo.pop()]):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and node.attr in methods
                and node.attr not in reached
            ):
                reached.add(node.attr)
                todo.append(node.attr)
    return reached


# Why a name the run found undefined is missing: it may come from a star
# import the reproduction does not run; in a file with none, nothing binds it.
_STAR_IMPORTED = "is not defined in the reproduction (a star import?)"
_UNBOUND = "is bound by no top-level statement of the file (which has no star import)"


def attempt(spec, plan, rewrite=None, after=None, helpers=None, undefined=None, around=None):
    """Run the reproduction once; errors are kept on the attempt, not raised.
    `undefined`: names an earlier attempt found missing (a star import)."""
    SYNTHESIZED.clear()
    MADE[0] = 0
    forget_analyses()
    CONFIGS.clear()
    spec = at_site(spec, plan)
    run = Attempt()
    run.plan = plan
    transform = _statement_transform(spec, rewrite=rewrite, force=plan.force, after=after)
    BASIS["call_site"] = plan.call_site
    BASIS["caller"] = plan.caller
    seed_everything(0)

    def hit():
        run.hits += 1

    def raised(error):
        if run.caught is None:
            run.caught = error

    run.script["argv"] = bool(spec.get("script", {}).get("argv") or (spec.get("call_site") or {}).get("argv"))
    try:
        user = UserModule(spec, transform, preset={"__dl_hit__": hit, "__dl_raised__": raised, **_script_helpers(run), **(helpers or {})})
    except SyntaxError as error:
        run.error = error
        return run
    run.user = user
    run.forced = user.forced
    unbound = _UNBOUND if spec.get("hints", {}).get("no_star_imports") else _STAR_IMPORTED
    for name in undefined or ():
        user.ns.setdefault(name, Missing(name, unbound, user.used_missing))
    synth = Synth(user, plan, spec.get("hints"))
    run.synth = synth
    try:
        with cpu_only():
            entry, run.entry = entry_point(spec, user, synth)
            # The file's call of code that reaches the target: the evidence names it.
            run.through = run.entry if plan.call_site and (spec.get("call_site") or {}).get("chain") else None
            seed_everything(0)
            MADE_AT_ENTRY[0] += MADE[0]
            with around() if around is not None else contextlib.nullcontext():
                run.result = entry()
        run.finished = True
    except Enough:
        run.finished = True
    except Inconclusive:
        raise
    except (Exception, SystemExit) as error:  # noqa: BLE001 - the user's code may raise anything
        run.error = error
    finally:
        user.close()
    if run.error is not None or not isinstance(run.caught, Exception) or isinstance(run.caught, Inconclusive):
        run.caught = None  # it reached the entry, or it is the reproduction's own signal (`Enough`, a time box)
    return run


def at_site(spec, plan):
    """The spec whose call site is the file's call the plan names: its first,
    one of the alternatives extraction kept (`train(buggy_model, ...)`), or
    one of the program's entry calls (`main()`)."""
    site = spec.get("call_site") or {}
    alternatives = site.get("alternatives") or []
    programs = spec.get("program_calls") or []
    if plan.call_site and 0 < plan.program <= len(programs):
        chosen = programs[plan.program - 1]
    elif not plan.call_site or not plan.site or plan.site > len(alternatives):
        return spec
    else:
        chosen = alternatives[plan.site - 1]
    blocks = [b for b in spec["blocks"] if not b.get("call_site")] + chosen["blocks"]
    return dict(spec, blocks=blocks, call_site={k: v for k, v in chosen.items() if k != "blocks"})


def plans(spec):
    base = Plan()
    if spec.get("call_site"):
        yield base.but(call_site=True)
    # The program's own entries (`main()`, the file run as a script) build
    # the target's inputs as the program does, before any synthesized input.
    for number in range(1, len(spec.get("program_calls") or []) + 1):
        yield base.but(call_site=True, program=number)
    yield base
    for caller in spec.get("hints", {}).get("callers", [])[:1]:
        # The class's own method that calls the target with what it builds.
        yield base.but(caller=caller)
    yield base.but(labels="float", out=1)
    yield base.but(tokens="flat")
    yield base.but(spatial=64)
    for size in spec.get("hints", {}).get("sizes", []):
        if size not in (32, 64):
            yield base.but(spatial=size)
    yield base.but(labels="float", out=4)
    yield base.but(labels="long", out=1, tokens="flat")
    yield base.but(spatial=224)


def find_working(spec, rewrite=None, after=None, helpers=None, need_finish=False, budget=None, around=None, accept=None):
    """The first attempt whose run reaches the finding's line (and, with
    need_finish, returns); when a run completes without reaching the line,
    the file's next calls of the code (a call site's alternatives), then the
    same plan again with the `if`s around the line forced. `accept(run)`:
    whether the run showed what the probe watches for (a backward after the
    line); a run that reached the line without it is returned only when no
    later plan's run shows it. Raises Inconclusive with the best reason."""
    started = time.monotonic()
    first_error = None
    tried = 0
    grad_off_line = grad_off_required(spec) if around is None else None
    if grad_off_line is not None:
        around = torch.no_grad
    reached = []  # the first run that reached the line but is kept only as a fallback

    def good(run):
        if not (run.hits and (run.finished or not need_finish)):
            return False
        # The program's own run stopped after the line on something else
        # (often a batch made up for its data), or the run did not show what
        # the probe watches for: the other plans first.
        stopped_later = run.plan.program and run.error is not None and not passed_through(run.error, spec, *statement_lines(spec))
        if not stopped_later and (accept is None or accept(run)):
            return True
        if not reached:
            run.grad_off_line = grad_off_line
            reached.append(run)
        return False

    undefined = []
    for plan in plans(spec):
        if tried >= MAX_ATTEMPTS or (budget and time.monotonic() - started > budget):
            break
        if plan.program:
            # The whole program may train for long before it reaches the line:
            # a share of the time, then synthesized inputs.
            share = PROGRAM_SHARE / len(spec["program_calls"])
            run = _time_boxed(share * (budget or PROGRAM_SECONDS), lambda: attempt(spec, plan, rewrite=rewrite, after=after, helpers=helpers, undefined=undefined, around=around))
            tried += 1
            if run is not None and good(run):
                run.grad_off_line = grad_off_line
                return run
            continue
        run = attempt(spec, plan, rewrite=rewrite, after=after, helpers=helpers, undefined=undefined, around=around)
        tried += 1
        # A name no block defines (`from utils import *`): stand it in, run again.
        while isinstance(run.error, NameError) and len(undefined) < 6 and not run.hits:
            name = getattr(run.error, "name", None) or _undefined_name(run.error)
            if not name or name in undefined:
                break
            undefined.append(name)
            run = attempt(spec, plan, rewrite=rewrite, after=after, helpers=helpers, undefined=undefined, around=around)
        if good(run):
            run.grad_off_line = grad_off_line
            return run
        if run.error is not None and is_memory_error(run.error):
            raise ResourceLimit("memory limit reached: " + describe_error(run.error, spec).split(": ", 1)[1])
        if run.error is None and not run.hits and plan.call_site and not plan.site:
            # The file's call did not reach the line: its next calls, as it makes them.
            for site in range(1, len((spec.get("call_site") or {}).get("alternatives") or []) + 1):
                run = attempt(spec, plan.but(site=site), rewrite=rewrite, after=after, helpers=helpers, undefined=undefined, around=around)
                tried += 1
                if good(run):
                    run.grad_off_line = grad_off_line
                    return run
                if run.error is not None or run.hits:
                    break
        if run.error is None and not run.hits and plan.call_site and (spec.get("call_site") or {}).get("chain"):
            # The file's call of a caller did not reach the line: the other plans, before forcing an `if`.
            continue
        if run.error is None and not run.hits and not plan.ctor:
            # The file builds a class in more than one way: the others, as it does, before forcing an `if`.
            others = max([len(c) for c in spec.get("hints", {}).get("ctor_calls", {}).values()] or [1])
            for shift in range(1, min(others, 3)):
                run = attempt(spec, plan.but(ctor=shift), rewrite=rewrite, after=after, helpers=helpers, undefined=undefined, around=around)
                tried += 1
                if good(run):
                    run.grad_off_line = grad_off_line
                    return run
                if run.error is not None or run.hits:
                    break
        if run.error is None and not run.hits:
            forced = attempt(spec, plan.but(force=True), rewrite=rewrite, after=after, helpers=helpers, undefined=undefined, around=around)
            tried += 1
            if good(forced):
                forced.grad_off_line = grad_off_line
                return forced
            run = forced
        if run.error is not None and first_error is None:
            first_error = run
    if reached:
        return reached[0]
    if first_error is not None:
        raise Inconclusive(describe_error(first_error.error, spec, first_error))
    raise Inconclusive(f"line {spec['line']} never ran with synthesized inputs")


# The program's own entry (`main()`) gets this share of a reproduction's
# budget (or these seconds, with none) before synthesized inputs are tried.
PROGRAM_SHARE = 0.4
PROGRAM_SECONDS = 2.0


class _TimeBox(BaseException):
    """The time box of one attempt ran out (past the user's `except Exception`)."""


def _time_boxed(seconds, function):
    """`function()`, or None when it takes longer than `seconds`; an outer
    alarm (the worker's time limit) is put back as it was, less the time
    spent."""
    if not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        return function()
    outer_left, _ = signal.getitimer(signal.ITIMER_REAL)
    if outer_left and outer_left <= seconds:
        return function()  # the outer limit comes first: it decides

    def ring(signum, frame):
        caller = frame
        while caller is not None:
            if caller.f_code.co_filename.startswith("<frozen importlib"):
                # Never in the middle of an import (torch's lazy `torch._dynamo`
                # on a first optimizer step): a half-made module breaks every later run.
                signal.setitimer(signal.ITIMER_REAL, 0.05)
                return
            caller = caller.f_back
        raise _TimeBox()

    previous = signal.signal(signal.SIGALRM, ring)
    started = time.monotonic()
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return function()
    except _TimeBox:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_left:
            signal.setitimer(signal.ITIMER_REAL, max(outer_left - (time.monotonic() - started), 0.001))


def _undefined_name(error):
    match = re.search(r"name '(\w+)' is not defined", str(error))
    return match.group(1) if match else None


# ---------------------------------------------------------------------------
# Script code: the helpers its rewritten lines call (extract.py writes them in).


SCRIPT_BATCHES = 3  # batches a script's data source yields: growth shows over three


_A_LOADER = Loader([])  # what synthesized batches answer besides a dataset's fields


class SynthesizedData:
    """A data source a script reads from files or through worker processes (a
    DataLoader, a dataset, batches from disk): batches synthesized in the
    shape the script uses them, made when it first iterates them. They are
    the program's input, as a function's arguments are, so the verdict still
    rests on the user's code; the evidence names them."""

    def __init__(self, name, run):
        object.__setattr__(self, "_dl_name", name)
        object.__setattr__(self, "_dl_run", run)
        object.__setattr__(self, "_dl_batches", None)
        object.__setattr__(self, "_dl_fields", {})  # tensors it holds all its samples in, by attribute

    def _dl_made(self):
        if self._dl_batches is None:
            run = self._dl_run
            function, name, env = _where_iterated(run.user, self._dl_name)
            batches = run.synth.loader(name, function, env)
            batches = Loader(list(batches)[:SCRIPT_BATCHES]) if len(batches) > SCRIPT_BATCHES else batches
            object.__setattr__(self, "_dl_batches", batches)
            run.script["data"][self._dl_name] = len(batches)
        return self._dl_batches

    def __iter__(self):
        return iter(self._dl_made())

    def __len__(self):
        return len(self._dl_made())

    def __getitem__(self, index):
        return self._dl_made()[index]

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if hasattr(_A_LOADER, name):
            return getattr(self._dl_made(), name)
        return self._dl_field(name)

    def _dl_field(self, attribute):
        """A dataset's samples read whole (`train_data.data[:100]`, the older
        `train_data.train_data`): synthesized as its batches are, in the shape
        the script uses them, once per attribute."""
        fields, making = self._dl_fields, vars(self).setdefault("_dl_making", set())
        if attribute not in fields:
            if attribute in making:
                # Synthesis reading the attribute while it shapes it (resolving the expression).
                raise AttributeError(attribute)
            making.add(attribute)
            try:
                script = _plain_script(self._dl_run.user)
                value = self._dl_run.synth.field_of(self._dl_name, attribute, script, dict(self._dl_run.user.ns))
            finally:
                making.discard(attribute)
            if value is None:
                raise AttributeError(f"{type(_A_LOADER).__name__!r} object has no attribute {attribute!r}")
            fields[attribute] = value
            self._dl_run.script["fields"].append(f"{self._dl_name}.{attribute}")
        return fields[attribute]

    def __repr__(self):
        return f"<synthesized data for {self._dl_name}>"


class _Unwrap(ast.NodeTransformer):
    """`__dl_loop__((x), 3, 12)` back to `x`: synthesis reads how the script iterates."""

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "__dl_loop__" and node.args:
            return node.args[0]
        return node


def _plain_script(user):
    """The script function as the file wrote it, made once per module:
    synthesis only reads it, once per data source and field it shapes."""
    if "_dl_plain_script" not in vars(user):
        function = user.find_function(SCRIPT_FUNCTION)
        user._dl_plain_script = _Unwrap().visit(_copy_function(function)) if function is not None else None
    return user._dl_plain_script


def _where_iterated(user, name):
    """(function, name, env) to shape the batches of a script's data source
    from: the file's function it is passed to (`train(model, train_loader)`),
    which uses the whole batch (labels too), with the script's values for
    that function's parameters; else the script itself."""
    script = _plain_script(user)
    env = dict(user.ns)
    if script is None:
        return script, name, env
    for call in walk(script):
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
            continue
        callee = user.find_function(call.func.id)
        if callee is None:
            continue
        params = [a.arg for a in callee.args.posonlyargs + callee.args.args]
        pairs = list(zip(params, call.args)) + [(k.arg, k.value) for k in call.keywords if k.arg]
        passed = {param: arg.id for param, arg in pairs if isinstance(arg, ast.Name)}
        for param, arg in passed.items():
            if arg == name and loop_targets(callee, param):
                values = {p: env[a] for p, a in passed.items() if a in env}
                return callee, param, values
    return script, name, env


# The basis of a script's verdict. Batches synthesized for a data source are
# the script's input, as a function's arguments are; a logger's output is
# discarded (nothing comes back from it); a skipped statement only wrote
# somewhere or loaded stored weights into a model the script built (its
# values are data too); a loop stopped early ran its first iterations as the
# program does. None of that replaces program logic: the verdict still rests
# on the user's code, and the evidence names each (`Attempt.inputs`). A value
# a cut call would have returned is `Missing`: if the code uses it, it is
# stubbed, and the verdict rests on a stand-in.
def _script_helpers(run):
    """The functions a script's rewritten lines call, recording on `run` what they did."""
    record = run.script

    def enough(count, cap, until_hit):
        # A loop around the finding goes on (to `until_hit`) while its line has not run yet.
        return count >= cap and not (count < until_hit and run.hits == 0)

    def loop(iterable, cap, line, until_hit=0):
        for count, item in enumerate(iterable):
            if enough(count, cap, until_hit):
                record["loops"][line] = count  # there was more: the program runs longer
                return
            yield item

    def while_(test, cap, line, until_hit=0):
        count = 0
        while test():
            if enough(count, cap, until_hit):
                record["loops"][line] = count
                return
            count += 1
            yield count

    def data(names, line):
        if isinstance(names, str):
            return SynthesizedData(names, run)
        return tuple(SynthesizedData(name, run) for name in names)

    def cut(name, text, line):
        reason = f"comes from `{text}(...)` in top-level script code (line {line}), which reaches a file, the network or the terminal and does not run here"
        return Missing(name, reason, run.user.used_missing)

    def skip(line):
        record["skipped"].append(line)

    def environment(module, make, env_id, name, line, api):
        return make_environment(module, make, env_id, name, api, record["envs"], run.user.used_missing if run.user else USED_NOW[0])

    def sink(name, line):
        record["sinks"].append(name)
        return Sink()

    return {"__dl_loop__": loop, "__dl_while__": while_, "__dl_data__": data, "__dl_cut__": cut, "__dl_skip__": skip, "__dl_env__": environment, "__dl_sink__": sink}
