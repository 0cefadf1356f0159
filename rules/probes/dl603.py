"""The probe of DL603 (a target network's output in a loss with autograd on).

The target network's output on the finding's line (does it carry a graph
back to the network's parameters?), and the `.grad` of those parameters just
before and just after the backward the finding names.
"""

import ast
import contextlib
import inspect
import re
import sys

import torch
from torch import nn

from detachlint.verify.runtime.standins import Enough, Inconclusive, tensors_in
from detachlint.verify.runtime.observe import copy_statement, describe_error, graph_leaves, notes, statement_lines, tapping_backward
from detachlint.verify.runtime.user_code import find_working, grad_off_required

# A replay buffer's own method that adds one transition, and the one that draws a batch.
_STORE = ("store_transition", "push", "add", "put", "store", "remember", "append", "add_transition", "memorize")
_FILL = 64  # transitions: more than the batch a learning step draws
_DONE = ("done", "dones", "terminal", "terminals", "done_mask", "mask", "d", "is_done", "terminated")
_ACTION = ("action", "actions", "a", "act")
_REWARD = ("reward", "rewards", "r", "rew")


def _entry_values():
    """(values, self_first): what the attempt running now calls its entry
    with, the instance of a method first (the entry is `lambda: function(*args)`)."""
    frame = sys._getframe(1)
    while frame is not None and not (frame.f_code.co_name == "attempt" and "entry" in frame.f_locals):
        frame = frame.f_back
    entry = frame.f_locals.get("entry") if frame is not None else None
    values, self_first = [], False
    for cell in getattr(entry, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:
            continue
        if isinstance(value, (tuple, list)):
            values.extend(value)
        elif isinstance(value, dict):
            values.extend(value.values())
        elif inspect.ismethod(value):
            values.insert(0, value.__self__)
            self_first = True
        else:
            values.append(value)
    return values, self_first


def _role(name):
    name = name.lower()
    if name in _DONE or "done" in name or "terminal" in name:
        return "done"
    if name in _ACTION or name.startswith("action"):
        return "action"
    if name in _REWARD or name.startswith("reward"):
        return "reward"
    if "state" in name or "obs" in name or name in ("s", "s_", "s2", "s_prime", "ns", "next_s", "x", "x_"):
        return "state"
    return None


def _unpacked_names(spec, buffer):
    """The names a batch the buffer's sampler returns is unpacked into, in the
    user's code: `s, a, r, s_, d = self.memory.sample(...)`, or the loop over
    the sampled transitions in the sampler itself."""
    samplers = [n for n in dir(type(buffer)) if n.startswith("sample")]
    for block in spec["blocks"]:
        try:
            tree = ast.parse(block["text"])
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) and isinstance(node.value, ast.Call):
                func = node.value.func
                if isinstance(func, ast.Attribute) and func.attr in samplers:
                    return node.targets[0].elts
            if isinstance(node, ast.FunctionDef) and node.name in samplers:
                for inner in ast.walk(node):
                    if isinstance(inner, ast.For) and isinstance(inner.target, ast.Tuple):
                        return inner.target.elts
    return None


def _transition_roles(spec, buffer, store):
    """(roles, packed): the role of each value one call of `store` takes; a
    store that takes one tuple gets the roles of the names a sampled batch
    is unpacked into."""
    params = [p.name for p in inspect.signature(store).parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(params) != 1:
        return [_role(p) for p in params], False
    names = _unpacked_names(spec, buffer)
    if not names:
        return [None], False
    return [_role(n.id) if isinstance(n, ast.Name) else None for n in names], True


def _store_of(buffer):
    """A replay buffer's own store method: an object of the user's classes
    with one of the `_STORE` methods and a sampler; else None."""
    store = next((getattr(buffer, n) for n in _STORE if callable(getattr(buffer, n, None))), None)
    if store is None or not any(n.startswith("sample") for n in dir(type(buffer))):
        return None
    return store


def _width(modules):
    """The input width of the first linear layer of these networks, or None."""
    return next((m.in_features for module in modules for m in module.modules() if isinstance(m, nn.Linear)), None)


def _fill(spec, buffer, named, width, filled):
    """`_FILL` synthesized transitions through the buffer's own store method;
    False when a value it takes has no role the probe can name."""
    store = _store_of(buffer)
    roles, packed = _transition_roles(spec, buffer, store)
    if not roles or None in roles:
        return False  # a value it takes the probe cannot name: leave it as built
    # Recorded before the first store: a buffer left half full is still said.
    record = [named, store.__name__, 0]
    filled.append(record)
    generator = torch.Generator().manual_seed(0)
    for i in range(_FILL):
        made = {
            "state": lambda: torch.randn(width, generator=generator).tolist(),
            "action": lambda: 0,
            "reward": lambda: 1.0,
            "done": lambda: i % 2 == 1,  # both kinds: a done mask of all zeros would hide any gradient
        }
        values = [made[role]() for role in roles]
        store(tuple(values)) if packed else store(*values)
        record[2] += 1
    return True


def _fill_buffers(spec, module_name, filled, stocked):
    """Before the entry runs: each replay buffer its instance or arguments
    hold gets `_FILL` transitions through its own store method, states as
    wide as the first linear layer of the networks beside it."""
    roots, self_first = _entry_values()
    objects, modules, todo = [], [], [(value, 0, "self" if i == 0 and self_first else None) for i, value in enumerate(roots)]
    seen = set()
    while todo:
        value, depth, path = todo.pop(0)
        if id(value) in seen or value is None:
            continue
        seen.add(id(value))
        if isinstance(value, nn.Module):
            modules.append(value)
            continue
        if type(value).__module__ != module_name or not hasattr(value, "__dict__"):
            continue
        objects.append((value, path))
        if depth < 2:
            todo.extend((v, depth + 1, f"{path}.{k}" if path else k) for k, v in vars(value).items())
    width = _width(modules)
    if width is None:
        return
    # The innermost first: an agent whose store method hands the transition
    # on to its buffer is filled through that buffer alone.
    for buffer, path in reversed(objects):
        if _store_of(buffer) is None or any(any(v is b for b in stocked) for v in vars(buffer).values()):
            continue
        named = f"the replay buffer `{path}` ({type(buffer).__name__})" if path else f"the `{type(buffer).__name__}` passed in"
        stocked.append(buffer)
        _fill(spec, buffer, named, width, filled)


def _modules_near(spec):
    """The networks the user's code running now holds in its local
    variables (and their attributes): where a buffer's states go."""
    modules, frame = [], sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == spec["path"]:
            for value in list(frame.f_locals.values()):
                found = [value]
                if hasattr(value, "__dict__") and not isinstance(value, (nn.Module, type)):
                    found += list(vars(value).values())  # an agent's networks
                modules.extend(v for v in found if isinstance(v, nn.Module))
        frame = frame.f_back
    return modules


def _filling_on_failure(spec, namespace, module_name, filled, stocked):
    """Each sampler of the user's buffer classes: when sampling a buffer the
    probe has not filled raises (an empty buffer built by the code the run
    runs), fill it through its own store method and sample again."""
    undo = []
    for value in list(namespace.values()):
        if not isinstance(value, type) or value.__module__ != module_name:
            continue
        if not any(callable(getattr(value, n, None)) for n in _STORE):
            continue
        for name in [n for n in vars(value) if n.startswith("sample") and callable(vars(value)[n])]:
            original = vars(value)[name]

            def sampler(self, *args, __original=original, **kwargs):
                try:
                    return __original(self, *args, **kwargs)
                except Exception:
                    width = _width(_modules_near(spec))
                    if any(self is b for b in stocked) or _store_of(self) is None or width is None:
                        raise
                    stocked.append(self)
                    if not _fill(spec, self, f"the `{type(self).__name__}` the code built", width, filled):
                        raise
                    return __original(self, *args, **kwargs)

            setattr(value, name, sampler)
            undo.append((value, name, original))
    return undo


def _filling(spec, filled):
    """`around` for find_working: fill the replay buffers just before the
    entry runs, and those the run builds when sampling them fails."""

    @contextlib.contextmanager
    def around():
        run = None
        frame = sys._getframe(1)
        while frame is not None and run is None:
            run = frame.f_locals.get("run") if frame.f_code.co_name == "attempt" else None
            frame = frame.f_back
        filled.clear()
        undo, stocked = [], []
        if run is not None and run.user is not None:
            try:
                _fill_buffers(spec, run.user.name, filled, stocked)
                undo = _filling_on_failure(spec, run.user.ns, run.user.name, filled, stocked)
            except Exception:  # noqa: BLE001 - a buffer the filler cannot fill stays as built
                pass
        try:
            yield
        finally:
            for klass, name, original in undo:
                setattr(klass, name, original)

    return around


def _grad_copies(params):
    return [None if p.grad is None else p.grad.detach().clone() for p in params]


def probe(spec, budget):
    """Run the step: confirmed when the backward the finding names puts
    gradients into the parameters of the target network that the output on
    the finding's line reaches; refuted when that output carries no graph to
    them, or the backward leaves their `.grad` as it was."""
    network = re.search(r"backward runs through `([^`]+)`", spec["message"])
    backward = re.search(r"reaches `([^`]+)` \(line (\d+)\)", spec["message"])
    if network is None or backward is None:
        raise Inconclusive("the finding names no target network or backward")
    network, (backward_text, backward_line) = network.group(1), (backward.group(1), int(backward.group(2)))
    try:
        ast.parse(network, mode="eval")
    except SyntaxError:
        raise Inconclusive(f"`{network}` is not an expression the reproduction can read")
    # A backward written over several lines reports any of them as the line running.
    backward_lines = statement_lines(dict(spec, line=backward_line, end_line=backward_line))
    seen = {}

    def watch_forward(module):
        """Catch the module's outputs, called as `net(x)` or `net.forward(x)`;
        returns what undoes it."""
        own = module.__dict__.get("forward")
        forward = module.forward

        def wrapper(*args, **kwargs):
            output = forward(*args, **kwargs)
            seen.setdefault("outputs", []).extend(t for t in tensors_in(output) if isinstance(t, torch.Tensor))
            return output

        object.__setattr__(module, "forward", wrapper)

        def undo():
            if own is None:
                object.__delattr__(module, "forward")
            else:
                object.__setattr__(module, "forward", own)

        return undo

    def before_statement(read):
        try:
            module = read()
        except Exception:  # noqa: BLE001 - a name the run cannot read is reported below
            module = None
        seen["module"] = module
        seen.pop("outputs", None)
        undo = seen.pop("hook", None)
        if undo is not None:
            undo()
        if isinstance(module, nn.Module):
            seen["hook"] = watch_forward(module)

    def after_statement():
        undo = seen.pop("hook", None)
        if undo is not None:
            undo()
            seen["ran"] = True

    def rewrite(statement):
        return ast.parse(f"__dl_target_before__(lambda: {network})").body + [copy_statement(statement)]

    def after(statement):
        # A new attempt: what an earlier one saw does not count.
        undo = seen.pop("hook", None)
        if undo is not None:
            undo()
        seen.clear()
        return ast.parse("__dl_target_after__()").body

    def before_backward(line):
        module = seen.get("module")
        if backward_lines[0] <= line <= backward_lines[1] and seen.get("ran") and "grads_before" not in seen and isinstance(module, nn.Module):
            seen["params"] = list(module.parameters())
            seen["grads_before"] = _grad_copies(seen["params"])

    def after_backward(line, error):
        if backward_lines[0] <= line <= backward_lines[1] and "grads_before" in seen and "measured" not in seen:
            seen["measured"] = True
            if error:
                seen["backward_error"] = error
            else:
                seen["grads_after"] = _grad_copies(seen["params"])
            raise Enough()  # all the probe needs: the rest of the run may stop

    helpers = {"__dl_target_before__": before_statement, "__dl_target_after__": after_statement}
    filled = []
    # A learning step that samples an empty replay buffer never gets to the
    # line: fill it first, through the buffer's own store method.
    around = _filling(spec, filled) if grad_off_required(spec) is None else None
    try:
        with tapping_backward(spec, before=before_backward, after=after_backward):
            run = find_working(spec, rewrite=rewrite, after=after, helpers=helpers, need_finish=True, budget=budget, around=around)
    finally:
        undo = seen.pop("hook", None)
        if undo is not None:
            undo()
    suffix = notes(run)
    if filled:
        made = "; ".join(f"{path} filled with {count} synthesized transitions through its own `{store}`" for path, store, count in filled)
        suffix = f" ({made})" if not suffix else suffix[:-1] + f"; {made})"
    module = seen.get("module")
    if not isinstance(module, nn.Module):
        what = "could not be read" if module is None else f"is a {type(module).__name__}, not an nn.Module"
        raise Inconclusive(f"`{network}` {what} when this line ran with synthesized inputs" + suffix)
    params = [p for p in module.parameters()]
    if not params:
        raise Inconclusive(f"`{network}` has no parameters when built with synthesized inputs" + suffix)
    outputs = seen.get("outputs") or []
    if not seen.get("ran") and run.error is not None:
        raise Inconclusive(describe_error(run.error, spec, run))
    if not seen.get("ran") or not outputs:
        raise Inconclusive(f"`{network}` was not called on this line with synthesized inputs" + suffix)
    ids = {id(p) for p in params}
    reached = {id(leaf) for out in outputs for leaf in graph_leaves(out)} & ids
    named = type(module).__name__
    total = f"{len(params)} parameter{'s' if len(params) != 1 else ''}"
    if not reached:
        frozen = sum(1 for p in params if not p.requires_grad)
        why = f"requires_grad=False for {'all' if frozen == len(params) else frozen} of them" if frozen else "none is in its graph"
        return "refuted", (
            f"the output of `{network}` ({named}) on this line carries no graph back to its {total} ({why}): "
            f"backward cannot reach them"
        ) + suffix
    if "grads_after" not in seen:
        if seen.get("backward_error"):
            raise Inconclusive(f"`{backward_text}` (line {backward_line}) raised RuntimeError: {seen['backward_error'].split('. ')[0]}" + suffix)
        if run.error is not None:
            raise Inconclusive(describe_error(run.error, spec, run))
        raise Inconclusive(f"`{backward_text}` (line {backward_line}) never ran after this line with synthesized inputs" + suffix)
    order = {id(p): i for i, p in enumerate(seen["params"])}
    changed, norms = 0, []
    for p in params:
        if id(p) not in reached or id(p) not in order:
            continue
        old, new = seen["grads_before"][order[id(p)]], seen["grads_after"][order[id(p)]]
        if new is None:
            continue
        delta = new if old is None else new - old
        if bool(delta.ne(0).any()):
            changed += 1
            norms.append(float(delta.float().norm()))
    details = {"target_parameters": len(params), "reached": len(reached), "received_gradient": changed}
    if changed:
        norm = sum(n * n for n in norms) ** 0.5
        return "confirmed", (
            f"the output of `{network}` ({named}) on this line reaches {len(reached)} of its {total}, and "
            f"`{backward_text}` (line {backward_line}) put gradients into {changed} of them (norm {norm:.4g})"
        ) + suffix, details
    left = f"`{backward_text}` (line {backward_line}) ran and left the .grad of `{network}`'s {total} as it was"
    if filled:
        # The transitions were made up: other ones (a done mask) may decide it.
        raise Inconclusive(left + suffix + "; with synthesized transitions this rules nothing out")
    return "refuted", left + suffix, details
