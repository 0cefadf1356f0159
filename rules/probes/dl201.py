"""The probe of DL201 (a cut leaves layers meant to train without gradients).

A cut inside `forward`: forward and backward through the model that holds
the named members (the members' own class, or the file's model that builds
it); the members' trainable parameters must all keep `grad None`. A loss a
method backpropagates after cutting a module's output: the graph of each
such loss must reach none of the module's trainable parameters. A dead loss
term: the term's value, read where the code computes it, must carry no graph
or one that reaches none of the named modules' trainable parameters.
"""

import ast
import re
import sys
import textwrap

import torch
from torch import nn

from detachlint.verify.runtime.standins import Inconclusive, tensors_in
from detachlint.verify.runtime.observe import BASIS, attempt_key, describe_error, graph_leaves, notes, weighted_sum
from detachlint.verify.runtime.user_code import find_working


def _names(names, limit=4):
    quoted = [f"`{n}`" for n in names]
    if len(quoted) > limit:
        return ", ".join(quoted[:limit]) + f" and {len(quoted) - limit} more"
    return ", ".join(quoted)


def probe(spec, budget):
    """Dispatch on the finding's kind: a cut in `forward`, a loss that
    leaves a stepped module out, or a dead loss term."""
    message = spec["message"]
    members = re.findall(r"`([^`]+)`", message.split(" never ")[0])
    if "from everything `forward` returns" in message:
        return _forward_cut(spec, budget, members)
    if "the loss term `" in message:
        return _dead_term(spec, budget, members)
    return _loss_leaves_out(spec, budget, members)


# ---------------------------------------------------------------------------
# A cut inside `forward`.


def _resolve(module, member):
    """The object `module.a.b` names, or None when it has no such attribute."""
    value = module
    for part in member.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            return None
    return value


def _parameters_of(member, value):
    """[(name, tensor)] of a member: a submodule's parameters, or the member
    itself when it is a parameter (`self.weight`)."""
    if isinstance(value, nn.Module):
        return [(f"{member}.{n}", p) for n, p in value.named_parameters()]
    if isinstance(value, nn.Parameter):
        return [(member, value)]
    if isinstance(value, torch.Tensor):
        return []  # a buffer as built here: the file may build it as a parameter
    return None


def _holders(spec, run, members):
    """Classes of the reproduction, other than the finding's, to build when the
    finding's class alone does not hold the named members as the file builds
    them: the file's models that assign the members in `__init__`, or that
    build the finding's class; the file's root models first."""
    target = spec["target"].get("class")
    roots = spec.get("hints", {}).get("root_classes") or []
    found = []
    for _, statements in run.user.blocks:
        for statement in statements:
            if not isinstance(statement, ast.ClassDef) or statement.name == target:
                continue
            if not isinstance(run.user.ns.get(statement.name), type) or not issubclass(run.user.ns[statement.name], nn.Module):
                continue
            methods = {s.name for s in statement.body if isinstance(s, ast.FunctionDef)}
            if "forward" not in methods:
                continue
            assigned = {
                node.attr
                for node in ast.walk(statement)
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self" and isinstance(node.ctx, ast.Store)
            }
            builds = any(isinstance(node, ast.Name) and node.id == target for node in ast.walk(statement))
            if builds or all(m.split(".")[0] in assigned for m in members):
                found.append(statement.name)
    return sorted(found, key=lambda name: (name not in roots, roots.index(name) if name in roots else 0))


def _owner_in(model, spec, members):
    """The module inside `model` that has every named member with parameters:
    the model itself, or a submodule of the finding's class."""
    target = spec["target"].get("class")
    candidates = [model] + [m for m in model.modules() if m is not model and type(m).__name__ == target]
    for candidate in candidates:
        values = [_parameters_of(m, _resolve(candidate, m)) for m in members]
        if all(v is not None for v in values) and any(values):
            return candidate
    return None


def _forward_cut(spec, budget, members):
    """Run forward and backward; the named members' trainable parameters
    must all keep `grad None`."""
    if (spec.get("call_site") or {}).get("chain"):
        # The model's own forward and backward: the file's call of a caller builds no module to read.
        spec = {k: v for k, v in spec.items() if k != "call_site"}
    # The module whose `forward` holds the cut, as the program's own run has
    # it (the method's first argument at the cut), when that run builds no module for us.
    owners = {}

    def at_cut():
        frame = sys._getframe(1)
        code = frame.f_code
        owner = frame.f_locals.get(code.co_varnames[0]) if code.co_argcount else None
        if isinstance(owner, nn.Module):
            owners[attempt_key()] = owner

    def built(run):
        # A module built for the probe first; the program's own is the fallback
        # `find_working` returns when no plan builds one.
        return run.synth.modules.get("") is not None

    run = find_working(
        spec, rewrite=lambda statement: ast.parse("__dl_owner__()").body + [statement], helpers={"__dl_owner__": at_cut},
        need_finish=True, budget=budget, accept=built,
    )
    module = run.synth.modules.get("")
    programs_own = module is None and run.user is not None and run.user.name in owners
    if programs_own:
        module = owners[run.user.name]
    if module is None:
        raise Inconclusive(f"`{spec['target'].get('class')}` is not an nn.Module")
    owner = _owner_in(module, spec, members)
    where, failures = "", []
    if owner is None:
        # The members are the file's model's (the cut is in a class it builds),
        # or the finding's class holds them only as the file builds it.
        for name in _holders(spec, run, members):
            other = dict(spec, target={"kind": "method", "class": name, "function": "forward"})
            other.pop("call_site", None)
            other.pop("program_calls", None)  # the program's entries build no module to read
            try:
                built = find_working(other, need_finish=True, budget=budget)
            except Inconclusive as reason:
                failures.append(f"`{name}`, the model that holds {_names(members)}, did not run: {reason}")
                continue
            model = built.synth.modules.get("")
            owner = _owner_in(model, spec, members) if model is not None else None
            if owner is not None:
                run, module, where = built, model, f" in `{name}`"
                break
    if owner is None and failures:
        raise Inconclusive(failures[0])
    if owner is None:
        missing = [m for m in members if _resolve(module, m) is None]
        if missing:
            raise Inconclusive(f"the module has no `{missing[0]}` when built with synthesized arguments, and the reproduction carries no model that holds it")
        raise Inconclusive(f"{_names(members)} {'has' if len(members) == 1 else 'have'} no parameters when built with synthesized arguments, and the reproduction carries no model that builds it")
    loss = None if programs_own else weighted_sum(tensors_in(run.result))
    if loss is not None:
        loss.backward()
    frozen, trained, not_trainable = [], [], []
    for member in members:
        params = [(n, p) for n, p in _parameters_of(member, _resolve(owner, member)) if p.requires_grad]
        if not params:
            not_trainable.append(member)
        for name, parameter in params:
            (frozen if parameter.grad is None else trained).append(name)
    named = {id(p) for m in members for _, p in _parameters_of(m, _resolve(owner, m))}
    others = [n for n, p in module.named_parameters() if p.grad is not None and id(p) not in named]
    details = {
        "parameters": [
            {"name": n, "requires_grad": p.requires_grad, "got_grad": p.grad is not None, "numel": p.numel()}
            for n, p in list(module.named_parameters())[:400]
        ]
    }
    if trained:
        return "refuted", f"{_names(trained)}{where} got gradients after backward through {run.entry}" + notes(run), details
    if not frozen:
        return "refuted", f"{_names(not_trainable)}{where} {'has' if len(not_trainable) == 1 else 'have'} no parameter with requires_grad=True: nothing trainable is cut off" + notes(run), details
    if programs_own and not others:
        # The program's own backward: with no other parameter holding a
        # gradient at its end (zeroed after the step), nothing was shown.
        raise Inconclusive(f"no parameter of the module held a gradient when {run.entry} ended" + notes(run))
    tail = f"; {_names(others, 2)} did get gradients" if others else ("; no output required grad" if loss is None else "")
    through = f" (backward through {run.entry})" if where else ""
    return "confirmed", f"{_names(frozen)}{where}: requires_grad=True, grad None after backward{through}{tail}" + notes(run), details


# ---------------------------------------------------------------------------
# A loss backpropagated after a module's output was cut.


def _trainable(value, member):
    found = _parameters_of(member, value)
    if found is None or (isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter)):
        raise Inconclusive(f"`{member}` is no module or tensor at run time ({type(value).__name__})")
    return [(n, p) for n, p in found if p.requires_grad]


def _read_members(frame, members):
    """The named members as the running function sees them (`self.encoder`),
    or, when it has no such member, as the nearest of its callers in the
    user's code does (`self._kernel` handed to a constraint module whose
    `forward` holds the cut)."""
    values = {}
    for member in members:
        if not re.fullmatch(r"[A-Za-z_][\w.]*", member):
            raise Inconclusive(f"`{member}` is not a name the probe can read")
        value, caller = None, frame
        while value is None and caller is not None:
            if caller.f_globals is frame.f_globals:  # the user's code, not torch's between
                value = _member_in(caller, member)
            caller = caller.f_back
        if value is None:
            raise Inconclusive(f"`{member}` is not set where the cut runs")
        values[member] = value
    return values


def _member_in(frame, member):
    head, *rest = member.split(".")
    value = frame.f_locals[head] if head in frame.f_locals else frame.f_globals.get(head)
    for part in rest:
        value = getattr(value, part, None)
    return value


def _callers_of_both(spec, helper):
    """Specs that run, instead of the cut's method, a method of its class that
    calls both it and the helper the message names (MAML's `meta_train_step`
    calling `inner_update`, where the cut is, then `outer_update`)."""
    target = spec["target"]
    if helper is None or target.get("kind") != "method" or not target.get("class"):
        return []
    found = []
    for block in spec["blocks"]:
        if block.get("script") or block.get("call_site"):
            continue
        try:
            tree = ast.parse(textwrap.dedent(block["text"]))
        except SyntaxError:
            continue
        for klass in tree.body:
            if not isinstance(klass, ast.ClassDef) or klass.name != target["class"]:
                continue
            for method in klass.body:
                if not isinstance(method, ast.FunctionDef) or method.name in (target["function"], helper):
                    continue
                called = {
                    node.func.attr
                    for node in ast.walk(method)
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "self"
                }
                if {target["function"], helper} <= called:
                    other = dict(spec, target=dict(target, function=method.name))
                    other.pop("call_site", None)
                    found.append(other)
    return found


def _loss_leaves_out(spec, budget, members):
    """Each loss the code backpropagates after the cut (in the helper the
    message names, or in the cut's own function) must have a graph that
    reaches none of the named modules' trainable parameters."""
    message = spec["message"]
    helper = re.search(r"the loss `([^`]+)\(\.\.\.\)` backpropagates", message)
    helper = helper.group(1).split(".")[-1] if helper else None
    seen = {"frame": None, "losses": []}

    def at_cut():
        frame = sys._getframe(1)
        if seen["frame"] is None or seen["frame"].f_globals is not frame.f_globals:
            seen["losses"] = []  # a new attempt
        seen["frame"] = frame
        if "members" not in seen or seen["members"][0] is not frame.f_globals:
            try:
                # As the cut sees them: the function may rebind a name later.
                seen["members"] = (frame.f_globals, _read_members(frame, members))
            except Inconclusive:
                pass

    def ours():
        target = seen["frame"]
        if target is None:
            return None
        frame = sys._getframe(2)
        innermost, stack = None, []
        while frame is not None:
            stack.append(frame)
            if frame.f_code.co_filename == spec["path"] and innermost is None:
                innermost = frame
                if frame.f_globals is not target.f_globals:
                    return None  # another attempt, whose cut has not run yet
            if helper is not None and frame.f_code.co_name == helper and frame.f_code.co_filename == spec["path"]:
                # The helper the message names, called after the cut ran.
                return innermost.f_lineno
            if helper is None and frame is target:
                return frame.f_lineno if innermost is target else None
            frame = frame.f_back
        if helper is None and innermost is not None and BASIS["call_site"] and target not in stack:
            # Run through the file's own call: the cut's function returned, and
            # its caller backpropagates (`loss.backward()` in `train_step`).
            seen["at"] = innermost
            return innermost.f_lineno
        return None

    originals = (torch.Tensor.backward, torch.autograd.backward)
    inside = []

    def watch(function):
        def wrapper(tensors, *args, **kwargs):
            line = None if inside else ours()
            if line is not None:
                roots = [tensors] if isinstance(tensors, torch.Tensor) else [t for t in tensors if isinstance(t, torch.Tensor)]
                leaves = {id(leaf) for root in roots for leaf in graph_leaves(root)}
                grad_fn = next((type(r.grad_fn).__name__ for r in roots if r.grad_fn is not None), None)
                seen["losses"].append({"line": line, "leaves": leaves, "grad_fn": grad_fn})
            inside.append(True)
            try:
                return function(tensors, *args, **kwargs)
            finally:
                inside.pop()

        return wrapper

    torch.Tensor.backward, torch.autograd.backward = (watch(f) for f in originals)
    run, failed, through = None, None, ""
    try:
        for attempt_spec in [spec] + _callers_of_both(spec, helper):
            try:
                run = find_working(
                    attempt_spec, rewrite=_at_cut_first,
                    helpers={"__dl_at_cut__": at_cut}, need_finish=True, budget=budget,
                    accept=lambda run: bool(seen["losses"]),
                )
            except Inconclusive as reason:
                if not seen["losses"] and attempt_spec is spec:
                    first = reason
                    continue
                if not seen["losses"]:
                    continue
                failed = reason
            if seen["losses"]:
                through = "" if attempt_spec is spec or run is None else f" (run through {run.entry}, which calls both)"
                break
        else:
            if run is None:
                raise first
    finally:
        torch.Tensor.backward, torch.autograd.backward = originals
    frame, losses = seen["frame"], seen["losses"]
    seen["frame"] = None
    if frame is None:
        raise Inconclusive(f"line {spec['line']} never ran with synthesized inputs")
    suffix = notes(run) if run is not None else ""
    if not losses:
        stopped = f" ({describe_error(run.error, spec, run)})" if run is not None and run.error is not None else ""
        where = f" in `{helper}`" if helper else ""
        raise Inconclusive(f"no backward ran{where} after line {spec['line']} with synthesized inputs{stopped}")
    read = seen.pop("members", None)
    if read is None and seen.get("at") is not None and seen["at"].f_globals is frame.f_globals:
        # The members are the caller's (`self.forward_policy` of the agent whose step backpropagates).
        frame = seen["at"]
    seen.pop("at", None)
    values = read[1] if read is not None and read[0] is frame.f_globals else _read_members(frame, members)
    params = {m: _stepped_instead(frame, spec, m, v) for m, v in values.items()}
    stepped = {m: p[1] for m, p in params.items() if p[1]}
    params = {m: p[0] for m, p in params.items()}
    # An object that is no module (an agent): the parameters the finding's optimizer steps.
    members_text = ", ".join(
        f"`{stepped[m]}` steps (`{m}` is no module: `{type(values[m]).__name__}`)" if m in stepped else f"of `{m}`" for m in params
    ) if stepped else f"of {_names(members)}"
    if not any(params.values()):
        return "refuted", f"{_names(members)} {'has' if len(members) == 1 else 'have'} no parameter with requires_grad=True: nothing trainable is cut off" + suffix
    reached = [
        (loss, [f"{m}.{n.split('.', 1)[1]}" if "." in n else n for m, found in params.items() for n, p in found if id(p) in loss["leaves"]])
        for loss in losses
    ]
    hit = next(((loss, names) for loss, names in reached if names), None)
    if hit is not None:
        loss, names = hit
        return "refuted", f"the loss backpropagated on line {loss['line']} (grad_fn={loss['grad_fn']}) reaches {_names(names, 3)}{through}" + suffix
    count = sum(len(found) for found in params.values())
    lines = ", ".join(str(n) for n in sorted({loss["line"] for loss in losses}))
    grad_fns = ", ".join(sorted({str(loss["grad_fn"]) for loss in losses}))
    return "confirmed", (
        f"the graph of the loss backpropagated on line {lines} (grad_fn={grad_fns}) reaches none of the "
        f"{count} trainable parameters {members_text}{through}"
    ) + suffix + (" (the run stopped after that backward)" if failed is not None else "")


def _at_cut_first(statement):
    """`__dl_at_cut__()` run where the cut is: before the statement, or, for
    a function the cut decorates (`@torch.no_grad()`), first in each call of it."""
    marker = ast.parse("__dl_at_cut__()").body
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
        for node in marker:
            ast.copy_location(node, statement.body[0])
            for child in ast.walk(node):
                ast.copy_location(child, statement.body[0])
        statement.body[:0] = marker
        return [statement]
    return marker + [statement]


def _stepped_instead(frame, spec, member, value):
    """(the trainable parameters of `member`, None); for an object that is no
    module or tensor (an agent holding its networks), the parameters of the
    optimizer the finding says steps them, with that optimizer's name."""
    if _parameters_of(member, value) is not None or isinstance(value, torch.Tensor):
        return _trainable(value, member), None
    named = re.search(r"yet (?:it steps )?`([^`]+)`", spec["message"])
    optimizer = _member_in(frame, named.group(1)) if named and re.fullmatch(r"[A-Za-z_][\w.]*", named.group(1)) else None
    if not isinstance(optimizer, torch.optim.Optimizer):
        return _trainable(value, member), None
    found = [p for group in optimizer.param_groups for p in group["params"] if p.requires_grad]
    return [(f"{named.group(1)}.param_groups[...][{i}]", p) for i, p in enumerate(found)], named.group(1)


# ---------------------------------------------------------------------------
# A dead loss term.


def _term_spec(spec, term):
    """The spec with the term's expression wrapped in `__dl_term__(...)` where
    the code computes it (in the cut's function first, at or after the cut),
    and the line it is on; None when no expression of the blocks reads so."""
    prefix = term[:-3] if term.endswith("...") else None
    matches = []
    for index, block in enumerate(spec["blocks"]):
        text = block["text"]
        if block.get("script") or block.get("call_site") or textwrap.dedent(text) != text:
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for node in ast.walk(tree):
            if not isinstance(node, ast.expr):
                continue
            segment = ast.get_source_segment(text, node)
            if segment is None or not (segment == term or (prefix and segment.startswith(prefix))):
                continue
            line = node.lineno + block["line"] - 1
            around = [f for f in functions if f.lineno + block["line"] - 1 <= spec["line"] <= (f.end_lineno or f.lineno) + block["line"] - 1]
            inside = any(f.lineno <= node.lineno <= (f.end_lineno or f.lineno) for f in around)
            matches.append(((not inside, line < spec["line"], abs(line - spec["line"])), index, node, line))
    if not matches:
        return None, None
    _, index, node, line = min(matches, key=lambda m: m[0])
    text = spec["blocks"][index]["text"]
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for piece in lines:
        offsets.append(offsets[-1] + len(piece.encode("utf-8")))
    raw = text.encode("utf-8")
    start = offsets[node.lineno - 1] + node.col_offset
    end = offsets[node.end_lineno - 1] + node.end_col_offset
    wrapped = raw[:start] + b"__dl_term__((" + raw[start:end] + b"))" + raw[end:]
    blocks = list(spec["blocks"])
    blocks[index] = dict(blocks[index], text=wrapped.decode("utf-8"))
    return dict(spec, blocks=blocks), line


def _dead_term(spec, budget, members):
    """The term's value where the code computes it: no graph, or a graph
    that reaches none of the named modules' trainable parameters."""
    term = re.search(r"the loss term `(.+?)` reaches", spec["message"], re.S)
    if term is None:
        raise Inconclusive("the finding names no loss term")
    term = term.group(1)
    if spec.get("loss_spec"):
        # The loss is backpropagated outside the code holding the cut: run that code.
        base = {k: v for k, v in spec.items() if k not in ("call_site", "script", "loss_spec")}
        spec = dict(base, **spec["loss_spec"])
    wrapped, line = _term_spec(spec, term)
    if wrapped is None:
        raise Inconclusive(f"the loss term `{term}` is not an expression of the code the reproduction carries")
    seen = {"values": [], "frame": None}

    def observe(value):
        frame = sys._getframe(1)
        if seen["frame"] is not None and seen["frame"].f_globals is not frame.f_globals:
            seen["values"] = []  # a new attempt
        seen["frame"] = frame
        if len(seen["values"]) < 3:
            if isinstance(value, torch.Tensor):
                seen["values"].append((value.requires_grad, type(value.grad_fn).__name__ if value.grad_fn is not None else None, {id(p) for p in graph_leaves(value)}, frame))
            else:
                seen["values"].append((None, type(value).__name__, set(), frame))
        return value

    run, failed = None, None
    try:
        run = find_working(wrapped, helpers={"__dl_term__": observe}, need_finish=True, budget=budget)
    except Inconclusive as reason:
        if not seen["values"]:
            raise
        failed = reason
    values = seen["values"]
    seen["frame"] = None
    suffix = notes(run) if run is not None else ""
    if not values:
        raise Inconclusive(f"the loss term on line {line} never ran with synthesized inputs")
    requires_grad, grad_fn, leaves, frame = values[0]
    if requires_grad is None:
        raise Inconclusive(f"the loss term on line {line} was a `{grad_fn}`, not a tensor")
    if not any(v[0] for v in values):
        return "confirmed", f"the loss term `{term}` (line {line}) was computed with requires_grad=False, grad_fn=None: no gradient flows back through it" + suffix
    params = {m: _trainable(v, m) for m, v in _read_members(frame, members).items()}
    if not any(params.values()):
        return "refuted", f"{_names(members)} {'has' if len(members) == 1 else 'have'} no parameter with requires_grad=True: nothing trainable is cut off" + suffix
    for requires_grad, grad_fn, leaves, _ in values:
        names = [f"{m}.{n.split('.', 1)[1]}" if "." in n else n for m, found in params.items() for n, p in found if id(p) in leaves]
        if names:
            return "refuted", f"the graph of the loss term `{term}` (line {line}, grad_fn={grad_fn}) reaches {_names(names, 3)}" + suffix
    count = sum(len(found) for found in params.values())
    grad_fns = ", ".join(sorted({str(v[1]) for v in values}))
    return "confirmed", (
        f"the loss term `{term}` (line {line}) has grad_fn={grad_fns}, but its graph reaches none of the "
        f"{count} trainable parameters of {_names(members)}"
    ) + suffix
