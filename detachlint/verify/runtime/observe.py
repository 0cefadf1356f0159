"""Watching the run: backward calls, where errors came from, what was stood in.

Probes share these observers: `watching_backward` records every backward
the user's code calls and what it raised, `observing` reads a value right
before or after the finding's statement, `describe_error` says where in the
user's file an error happened and which missing names it touched, and
`notes` says what the run stood in, which `BASIS` turns into the verdict's
basis.
"""

import ast
import contextlib
import re
import sys
import warnings

import torch

from detachlint.verify.runtime.standins import SYNTHESIZED, Inconclusive, Missing, config_notes, is_synthesized, parse_at, tensors_in
from detachlint.verify.runtime.synthesis import locate


def describe_error(error, spec, run=None):
    """`TypeError: ... (line 23)`: the error, at the last line of the user's file it
    passed, and which missing names the code touched on the way."""
    line = user_line(error, spec)
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    text = text if len(text) <= 160 else text[:157] + "..."
    where = f" on line {line}" if line else ""
    missing = ""
    if run is not None and run.user is not None and run.user.used_missing and _from_missing(error):
        name, reason = next(iter(run.user.used_missing.items()))
        more = len(run.user.used_missing) - 1
        missing = f" (it needs `{name}`, which {reason}" + (f"; {more} more missing" if more else "") + ")"
    return f"the code could not run with synthesized inputs: {type(error).__name__}: {text}{where}{missing}"


def _from_missing(error):
    """Whether `error` came from a stand-in for a missing name: raised in its
    own code, or about one of its values (`'Missing' and 'int'`, `<missing
    tf.shape>`). Any other error is the code's own, whatever it touched."""
    text = str(error)
    if "Missing" in text or "<missing " in text:
        return True
    trace = error.__traceback__
    while trace is not None:
        if type(trace.tb_frame.f_locals.get("self")) is Missing:
            return True
        trace = trace.tb_next
    return False


# What the verdict of the reproduction running now rests on, reset by `run`:
# the stand-ins `notes` reported (`replaced`: those among them that replaced
# a part of the program, not a branch forced or a value made up), whether the
# inputs came from one call site of several (or through one of the methods
# that call the target, `caller`), and `untouched`: a probe's word that the
# value it observed came from no replaced part. `run` turns it into the
# verdict's basis.
BASIS = {"stand_ins": [], "replaced": [], "call_site": False, "caller": None, "untouched": None}


def notes(run):
    """What the evidence should say was stood in (and, so, what the verdict rests on)."""
    parts = []
    others = set(run.synth.globals_stood_in + run.synth.attributes_stood_in) if run.synth is not None else set()
    models = [n for n in dict.fromkeys(run.synth.stand_ins) if n not in others] if run.synth is not None else []
    if models:
        names = ", ".join(f"`{n}`" for n in models)
        parts.append(f"stand-in model for {names}")
    if run.synth is not None and run.synth.globals_stood_in:
        names = ", ".join(f"`{n}`" for n in run.synth.globals_stood_in)
        parts.append(f"stand-ins for the script variables {names}")
    losses = [n for n in dict.fromkeys(getattr(run.synth, "losses_stood_in", [])) if n not in others] if run.synth is not None else []
    if losses:
        parts.append(f"stand-in loss for {', '.join(f'`{n}`' for n in losses)}")
    if run.synth is not None and run.synth.attributes_stood_in:
        names = ", ".join(f"`self.{n}`" for n in run.synth.attributes_stood_in)
        parts.append(f"stand-ins for {names}")
    if run.user is not None and run.user.used_missing:
        names = ", ".join(f"`{n}`" for n in list(run.user.used_missing)[:3])
        parts.append(f"{names} stubbed")
    BASIS["replaced"].extend(parts)
    if run.forced:
        lines = ", ".join(str(n) for n in sorted(set(run.forced)))
        parts.append(f"`if` on line {lines} forced")
    config_inputs, config_stand_ins = config_notes()
    parts.extend(config_stand_ins)
    BASIS["stand_ins"].extend(parts)
    if getattr(run, "through", None):
        through = run.through if run.through.startswith("the file's") else f"the file's call {run.through}"
        parts.append(f"run through {through}")
    # A script's inputs (synthesized batches for its data), not stand-ins.
    parts.extend(getattr(run, "inputs", None) or [])
    if run.synth is not None and getattr(run.synth, "data_globals", None):
        names = ", ".join(f"`{n}`" for n in run.synth.data_globals)
        parts.append(f"with synthesized batches for the data source {names}")
    for name, cls in getattr(run.synth, "configs_built", None) or []:
        parts.append(f"`{name}` built as the file's `{cls}()` with its defaults")
    # Config fields: the program's own values, or made-up ones `verdict` weighs.
    parts.extend(config_inputs)
    if getattr(run, "grad_off_line", None) is not None:
        # The program's own requirement, not a stand-in: it says so, no more.
        where = run.grad_off_line
        if isinstance(where, str):
            parts.append(f"run under torch.no_grad(), as its call {where} runs it")
        else:
            parts.append(f"run under torch.no_grad(), as line {where} requires")
    return f" ({'; '.join(parts)})" if parts else ""


def weighted_sum(tensors):
    """A scalar whose gradient reaches every output element (a plain `.sum()`
    of a softmax would give zero gradients)."""
    generator = torch.Generator().manual_seed(2)
    total = None
    for tensor in tensors:
        if not (tensor.is_floating_point() or tensor.is_complex()) or not tensor.requires_grad:
            continue
        weights = torch.randn(tensor.shape, generator=generator, dtype=torch.float32)
        term = (tensor.float() * weights).sum()
        total = term if total is None else total + term
    return total


def copy_statement(node):
    return ast.parse(ast.unparse(node)).body[0] if hasattr(ast, "unparse") else node


def called_from(spec, statement_lines=None):
    """Whether the caller's caller runs in the user's file (on these lines)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == spec["path"]:
            return statement_lines is None or statement_lines[0] <= frame.f_lineno <= statement_lines[1]
        frame = frame.f_back
    return False


def statement_lines(spec):
    """First and last line of the statement the finding is on."""
    for block in spec["blocks"]:
        tree = parse_at(block["text"], block["line"])
        located = locate(tree, spec["line"])
        if located is not None:
            statement = located[2]
            return statement.lineno, statement.end_lineno or statement.lineno
    return spec["line"], spec.get("end_line") or spec["line"]


@contextlib.contextmanager
def watching_backward(spec, lines=None, when=lambda: True):
    """Meanwhile, each backward the user's code calls (from `lines`, and
    while `when()`) adds its outcome to the list yielded: None when it ran,
    its RuntimeError message when it raised."""
    outcomes = []
    originals = (torch.Tensor.backward, torch.autograd.backward)

    def watch(function):
        def wrapper(*args, **kwargs):
            if not (called_from(spec, lines) and when()):
                return function(*args, **kwargs)
            try:
                result = function(*args, **kwargs)
            except RuntimeError as error:
                outcomes.append(str(error))
                raise
            outcomes.append(None)
            return result

        return wrapper

    torch.Tensor.backward, torch.autograd.backward = (watch(function) for function in originals)
    try:
        yield outcomes
    finally:
        torch.Tensor.backward, torch.autograd.backward = originals


def calling_line(spec):
    """The line of the user's file the running code was called from (the
    innermost frame in that file), or None."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == spec["path"]:
            return frame.f_lineno
        frame = frame.f_back
    return None


@contextlib.contextmanager
def tapping_backward(spec, before=None, after=None):
    """Meanwhile, each backward the user's code calls runs between
    `before(line)` and `after(line, error)`: `line` is the user's line that
    called it, `error` the RuntimeError message it raised, or None."""
    originals = (torch.Tensor.backward, torch.autograd.backward)
    inside = []

    def tap(function):
        def wrapper(*args, **kwargs):
            line = None if inside else calling_line(spec)
            if line is None:
                return function(*args, **kwargs)
            # `Tensor.backward` calls `torch.autograd.backward`: one backward, one tap.
            inside.append(line)
            try:
                if before is not None:
                    before(line)
                try:
                    result = function(*args, **kwargs)
                except RuntimeError as error:
                    if after is not None:
                        after(line, str(error))
                    raise
                if after is not None:
                    after(line, None)
                return result
            finally:
                inside.pop()

        return wrapper

    torch.Tensor.backward, torch.autograd.backward = (tap(function) for function in originals)
    try:
        yield
    finally:
        torch.Tensor.backward, torch.autograd.backward = originals


@contextlib.contextmanager
def first_backward_gradients(spec, when=lambda: True):
    """Meanwhile, the first backward the user's code calls while `when()`:
    the gradient it adds to each leaf its graph reaches, in the graph's
    order (`grads`), or the RuntimeError message it raised (`error`)."""
    record = {}
    originals = (torch.Tensor.backward, torch.autograd.backward)

    def watch(function):
        def wrapper(*args, **kwargs):
            if record or not when() or calling_line(spec) is None:
                return function(*args, **kwargs)
            roots = args[0] if args else kwargs.get("tensors")
            roots = [roots] if isinstance(roots, torch.Tensor) else [r for r in (roots or ()) if isinstance(r, torch.Tensor)]
            record["started"] = True  # `Tensor.backward` calls `torch.autograd.backward`: one record
            outcome = {}
            record.update(_gradients_added(roots, lambda: outcome.setdefault("result", function(*args, **kwargs))))
            if "raised" in record:
                raise record.pop("raised")  # the user's code sees torch's own error
            return outcome["result"]

        return wrapper

    torch.Tensor.backward, torch.autograd.backward = (watch(function) for function in originals)
    try:
        yield record
    finally:
        torch.Tensor.backward, torch.autograd.backward = originals


def returned_backward(run):
    """A backward from what the code returned (a fixed weighting of its
    tensors, as `weighted_sum` makes it): `grads` and `error` as
    `first_backward_gradients` records them; None when nothing returned
    carries a graph."""
    total = weighted_sum(tensors_in(run.result)) if run is not None else None
    if total is None or not total.requires_grad:
        return None
    return _gradients_added([total], total.backward)


def _gradients_added(roots, backward):
    """Run `backward()`, a backward from `roots`: {"grads": the gradient it
    added to each leaf their graphs reach, in the graphs' order}, or
    {"error": the RuntimeError message it raised, "raised": the error}."""
    leaves = []
    for root in roots:
        leaves += [leaf for leaf in graph_leaves(root) if all(leaf is not other for other in leaves)]
    before = [None if leaf.grad is None else leaf.grad.detach().clone() for leaf in leaves]
    try:
        backward()
    except RuntimeError as error:
        return {"error": str(error), "raised": error}
    return {
        "grads": [
            (torch.zeros_like(leaf) if leaf.grad is None else leaf.grad.detach().clone()) - (0 if old is None else old)
            for leaf, old in zip(leaves, before)
        ]
    }


def graph_leaves(tensor):
    """The leaf tensors (parameters, mostly) whose `.grad` a backward from
    `tensor` fills: the variables of the AccumulateGrad nodes its graph reaches."""
    leaves, seen = {}, set()
    todo = [tensor.grad_fn] if isinstance(tensor, torch.Tensor) and tensor.grad_fn is not None else []
    if isinstance(tensor, torch.Tensor) and tensor.is_leaf and tensor.requires_grad:
        leaves[id(tensor)] = tensor
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            leaves.setdefault(id(variable), variable)
        todo.extend(child for child, _ in getattr(node, "next_functions", ()) if child is not None)
    return list(leaves.values())


def attempt_key():
    """The module name of the reproduction attempt running now (each attempt
    rebuilds the user's module under a new name; `run.user.name` is the
    same): observers keep what each attempt saw apart with it."""
    frame = sys._getframe(1)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith("detachlint_repro_"):
            return name
        frame = frame.f_back
    return None


def running_attempt():
    """The attempt (`user_code.attempt`'s run) the calling code runs in, or
    None: a probe that keeps what it saw after the run failed still needs
    `notes` of that run, so the verdict's basis counts its stand-ins."""
    frame = sys._getframe(1)
    while frame is not None:
        run = frame.f_locals.get("run") if frame.f_code.co_name == "attempt" else None
        if run is not None and hasattr(run, "hits") and hasattr(run, "synth"):
            return run
        frame = frame.f_back
    return None


@contextlib.contextmanager
def inputs_requiring_grad(keep=None):
    """Meanwhile, the floating-point inputs the reproduction synthesized
    require grad: a value that still carries no graph then lost it in the
    user's code, not because the inputs had none. `keep(tensor)`: inputs
    left as they are. Yields how many."""
    made = []
    for ref in list(SYNTHESIZED.values()):
        tensor = ref()
        if keep is not None and isinstance(tensor, torch.Tensor) and keep(tensor):
            continue
        if isinstance(tensor, torch.Tensor) and tensor.is_floating_point() and tensor.is_leaf and not tensor.requires_grad:
            tensor.requires_grad_(True)
            made.append(tensor)
    try:
        yield len(made)
    finally:
        for tensor in made:
            tensor.requires_grad_(False)


def user_line(error, spec):
    """The last line of the user's file the error's traceback passed."""
    line, tb = None, error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == spec["path"]:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def statement_error(run):
    """(the error the run stopped on, or else the one the finding's statement
    raised that the program caught; the words saying it was caught)."""
    if run.error is None and run.caught is not None:
        return run.caught, " (the program caught it and went on)"
    return run.error, ""


def passed_through(error, spec, first, last):
    """Whether the error's traceback passed the user's lines `first`-`last`:
    the statement there raised, itself or in a function it called."""
    tb = error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == spec["path"] and first <= tb.tb_lineno <= last:
            return True
        tb = tb.tb_next
    return False


def named_in_message(spec, pattern):
    match = re.search(pattern, spec["message"])
    if match is None:
        raise Inconclusive("the finding names no tensor")
    return match.group(1)


def observing(spec, name, before=False):
    """`(after, helpers, seen)`: observe `name` just before or just after the finding's statement."""
    seen = {}

    def observe(value):
        if "value" not in seen:
            seen["value"] = value
            if isinstance(value, torch.Tensor):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # .grad of a non-leaf warns
                    seen["state"] = (value.is_leaf, value.requires_grad, value.grad is not None, value.retains_grad)
                seen["synthesized"] = is_synthesized(value)
            seen["grad_enabled"] = torch.is_grad_enabled()

    code = ast.parse(f"__dl_observe__({name})").body
    if before:
        return None, (lambda statement: code + [copy_statement(statement)]), {"__dl_observe__": observe}, seen
    return (lambda statement: code), None, {"__dl_observe__": observe}, seen
