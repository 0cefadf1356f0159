"""The probe of DL103 (`.data` read where harm follows).

A 0-dim index raises "invalid index of a 0-dim tensor" on its line. For a
cut factor, penalty or loop state: whether the tensor `.data` is read from
requires grad at the line, and whether the value built from the read does.
For a kept alias: after the run, whether the kept value shares the source's
storage and was rewritten in place after it was stored.
"""

import ast
import contextlib
import re
import sys
import textwrap

import torch

from detachlint.verify.runtime.standins import Inconclusive
from detachlint.verify.runtime.observe import BASIS, copy_statement, describe_error, notes, watching_backward
from detachlint.verify.runtime.shared_probes import raises_on_its_line
from detachlint.verify.runtime.synthesis import Spec, locate
from detachlint.verify.runtime.user_code import find_working

_ZERO_DIM = raises_on_its_line("invalid index of a 0-dim tensor")
_MAX_STEPS = 6


def _source_name(spec):
    match = re.match(r"`(.+?)\.data` (indexes|cuts|is kept)", spec["message"])
    if match is None or match.group(1).endswith("..."):
        raise Inconclusive("the finding names no tensor the reproduction can read")
    return match.group(1)


def _statement(spec):
    for block in spec["blocks"]:
        tree = ast.parse(block["text"])
        ast.increment_lineno(tree, block["line"] - 1)
        located = locate(tree, spec["line"])
        if located is not None:
            return located[2]
    return None


def _same(node, text):
    try:
        return ast.unparse(node) == ast.unparse(ast.parse(text, mode="eval").body)
    except SyntaxError:
        return False


def _term(statement, name, column):
    """The summand of the statement that holds the `name.data` read: its
    enclosing expression, up to the first `+`/`-` or the statement."""
    parents, reads = {}, []
    for node in ast.walk(statement):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
        if isinstance(node, ast.Attribute) and node.attr == "data" and _same(node.value, name):
            reads.append(node)
    if not reads:
        return None
    # The read at the finding's column (1-based), else the first.
    node = next((r for r in reads if column is not None and r.value.col_offset == column - 1), reads[0])
    while True:
        parent = parents.get(node)
        if parent is None or isinstance(parent, ast.stmt):
            return node
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, (ast.Add, ast.Sub)):
            return node
        if isinstance(parent, (ast.Lambda, ast.comprehension, ast.ListComp, ast.GeneratorExp, ast.DictComp, ast.SetComp)):
            return node
        node = parent


def _state(value):
    if not isinstance(value, torch.Tensor):
        return None
    return value.requires_grad, type(value.grad_fn).__name__ if value.grad_fn is not None else None


def _observe_cut(spec, budget, name):
    """Per run of the statement: the source's state before it, and the
    state of the value built from the read (the assigned name after it, or
    the summand evaluated just before it)."""
    statement = _statement(spec)
    if statement is None:
        raise Inconclusive("the statement could not be found in the reproduction")
    term = _term(statement, name, spec.get("column"))
    if term is None:
        raise Inconclusive(f"the statement reads no `{name}.data` the reproduction can find")
    steps = []
    assigned = None
    if (
        isinstance(statement, ast.Assign)
        and len(statement.targets) == 1
        and isinstance(statement.targets[0], ast.Name)
        and statement.value is term
    ):
        assigned = statement.targets[0].id

    def before(source, value=None, has_value=False):
        if len(steps) < _MAX_STEPS:
            steps.append({"source": _state(source), "term": _state(value) if has_value else None})

    def after(value):
        if steps and steps[-1]["term"] is None:
            steps[-1]["term"] = _state(value)

    def rewrite(original):
        if assigned is not None:
            call = f"__dl_before__({name})"
        else:
            call = f"__dl_before__({name}, ({ast.unparse(term)}), True)"
        # A read the statement itself would not reach must not stop the run.
        guarded = ast.parse(f"try:\n    {call}\nexcept Exception:\n    pass").body
        return guarded + [copy_statement(original)]

    def observe_after(original):
        return ast.parse(f"__dl_after__({assigned})").body if assigned is not None else []

    helpers = {"__dl_before__": before, "__dl_after__": after}
    with watching_backward(spec, when=lambda: bool(steps)) as backwards:
        try:
            run = find_working(spec, rewrite=rewrite, after=observe_after, helpers=helpers, budget=budget)
        except Inconclusive:
            if not steps:
                raise
            run = None
    described = assigned or ast.unparse(term)
    return steps, run, described, backwards


_INPUTS_WITH_GRAD = "stand-in inputs: the synthesized float tensors made to require grad, as a model's outputs do"


@contextlib.contextmanager
def _inputs_with_grad():
    """Meanwhile, the float tensors the reproduction synthesizes require grad."""
    original = Spec.make

    def make(self):
        tensor = original(self)
        return tensor.requires_grad_() if tensor.is_floating_point() else tensor

    Spec.make = make
    try:
        yield
    finally:
        Spec.make = original


def _grad_fn(state):
    return f" (grad_fn={state[1]})" if state[1] else ""


def _cut(spec, budget, kind):
    name = _source_name(spec)
    steps, run, described, backwards = _observe_cut(spec, budget, name)
    stood_in = ""
    if steps and not any(s["source"] and s["source"][0] for s in steps):
        # A loss helper's arguments are model outputs in the program; the
        # synthesized ones carry no graph. Again with inputs that do: a stand-in.
        with _inputs_with_grad():
            try:
                again = _observe_cut(spec, budget, name)
            except Inconclusive:
                again = None
        if again is not None and any(s["source"] and s["source"][0] for s in again[0]):
            steps, run, described, backwards = again
            BASIS["stand_ins"].append(_INPUTS_WITH_GRAD)
            stood_in = f"; {_INPUTS_WITH_GRAD}"
    suffix = notes(run) if run is not None else ""
    if stood_in:
        suffix = f" ({stood_in[2:]}{'; ' + suffix[2:-1] if suffix else ''})"
    seen = [s for s in steps if s["source"] is not None and s["term"] is not None]
    if not seen:
        stopped = f" ({describe_error(run.error, spec, run)})" if run is not None and run.error is not None else ""
        raise Inconclusive(f"`{name}` was not a tensor when the line ran with synthesized inputs{stopped}")
    for number, step in enumerate(seen, start=1):
        source, term = step["source"], step["term"]
        if not source[0]:
            continue
        where = f"on step {number} of the loop, " if kind == "state" and len(seen) > 1 else ""
        if term[0]:
            return "refuted", f"{where}`{described}` requires grad{_grad_fn(term)}: the graph of `{name}` reaches it" + suffix
        if kind == "state":
            text = (
                f"{where}`{name}` required grad{_grad_fn(source)} before the statement and not after "
                f"(requires_grad=False, grad_fn=None): the graph of the earlier steps no longer reaches it"
            )
        else:
            text = f"`{name}` requires grad{_grad_fn(source)} at the line, while `{described}`, built from `{name}.data`, has requires_grad=False, grad_fn=None"
            if kind == "dead" and any(outcome is None for outcome in backwards):
                text += "; the backward after it ran"
        return "confirmed", text + suffix
    if kind == "state" and len(seen) < 2:
        raise Inconclusive(f"the loop ran the statement {len(seen)} time with synthesized inputs; the state carries a graph from the second step on" + suffix)
    raise Inconclusive(f"`{name}` did not require grad when the line ran, so `.data` had no graph to cut at these inputs" + suffix)


def _store_lines(spec, alias, store):
    """The lines after the finding's that store the alias (`store = alias`)."""
    try:
        wanted = ast.unparse(ast.parse(store, mode="eval").body)
    except SyntaxError:
        return set()
    lines = set()
    for block in spec["blocks"]:
        # A call site's statements come indented from the `__main__` block.
        tree = ast.parse(textwrap.dedent(block["text"]))
        ast.increment_lineno(tree, block["line"] - 1)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Assign)
                and node.lineno > spec["line"]
                and isinstance(node.value, ast.Name)
                and node.value.id == alias
                and any(ast.unparse(target) == wanted for target in node.targets)
            ):
                lines.add(node.lineno)
    return lines


def _kept(spec, budget):
    name = _source_name(spec)
    match = re.search(r"is kept as `([^`]+)` in `([^`]+)`", spec["message"])
    if match is None:
        raise Inconclusive("the finding names no store for the kept value")
    alias, store = match.groups()
    stores = _store_lines(spec, alias, store)
    seen = {}

    def snapshot(frame):
        try:
            kept = eval(store, frame.f_globals, dict(frame.f_locals))  # noqa: S307 - the user's own expression
        except Exception:  # noqa: BLE001
            return
        if isinstance(kept, torch.Tensor):
            seen["stored"] = kept.detach().clone()
            records = seen.setdefault("records", [])
            if len(records) < 64:
                # The stored object itself, to see it rewritten before the line runs again.
                records.append((kept, seen["stored"]))

    def tracer(frame, event, arg):
        # Right after a store line ran: the kept value as it was stored.
        if event in ("line", "return") and seen.get("last") in stores:
            snapshot(frame)
        seen["last"] = frame.f_lineno
        return tracer

    def observe(value):
        # The last run of the statement: the frame reads the store after the run.
        frame = sys._getframe(1)
        seen["frame"] = frame
        seen.pop("stored", None)
        for kept, stored in seen.get("records", []):
            if "rewritten" not in seen and kept.shape == stored.shape and not torch.equal(kept.detach(), stored):
                seen["rewritten"] = (int((kept.detach() != stored).sum()), kept.numel())
        if stores and frame.f_trace is None:
            frame.f_trace_lines = True
            frame.f_trace = tracer

    def after(statement):
        return ast.parse(f"__dl_seen__({alias})").body

    previous = sys.gettrace()
    if stores:
        # Frame tracing runs only while a trace function is set; this one traces no new frame.
        sys.settrace(lambda *args: None)
    try:
        run = find_working(spec, after=after, helpers={"__dl_seen__": observe}, budget=budget)
    finally:
        sys.settrace(previous)
        if "frame" in seen:
            seen["frame"].f_trace = None
    suffix = notes(run)
    if "frame" not in seen:
        if run.error is not None:
            raise Inconclusive(describe_error(run.error, spec, run))
        raise Inconclusive("the statement never finished with synthesized inputs" + suffix)
    frame = seen["frame"]
    try:
        kept = eval(store, frame.f_globals, dict(frame.f_locals))  # noqa: S307 - the user's own expression
        current = eval(name, frame.f_globals, dict(frame.f_locals))  # noqa: S307
    except Exception as error:  # noqa: BLE001
        if run.error is not None:
            raise Inconclusive(describe_error(run.error, spec, run)) from None
        raise Inconclusive(f"`{store}` could not be read after the run ({type(error).__name__}: {error})" + suffix) from None
    if not all(isinstance(t, torch.Tensor) for t in (kept, current)):
        raise Inconclusive(f"`{store}` or `{name}` was not a tensor after the run with synthesized inputs" + suffix)
    ended = "after the run" if run.error is None else f"when the run stopped ({describe_error(run.error, spec, run).split(': ', 1)[-1]})"
    if kept.untyped_storage().data_ptr() != current.untyped_storage().data_ptr() or not kept.numel():
        return "refuted", f"{ended}, `{store}` has its own storage, not `{name}`'s (data_ptr differ)" + suffix
    shared = f"{ended}, `{store}` shares `{name}`'s storage (same data_ptr)"
    stored = seen.get("stored")
    if stored is not None and kept.shape == stored.shape and not torch.equal(kept, stored):
        same = " and equals it" if kept.shape == current.shape and torch.equal(kept, current) else ""
        changed = int((kept != stored).sum())
        return "confirmed", (
            f"{shared}{same}: {changed} of its {kept.numel()} values were rewritten in place after it was stored"
        ) + suffix
    if seen.get("rewritten"):
        changed, count = seen["rewritten"]
        return "confirmed", (
            f"{shared}; a value stored in `{store}` had {changed} of its {count} values rewritten in place "
            f"before line {spec['line']} ran again"
        ) + suffix
    if stored is None:
        raise Inconclusive(f"{shared}, but the run did not show the value it held when stored" + suffix)
    refill = (
        "the next backward refills it in place (`zero_grad(set_to_none=False)`, accumulation) or replaces it"
        if name.endswith(".grad") else "an in-place update comes later"
    )
    raise Inconclusive(f"{shared}, but nothing rewrote it in place after it was stored; whether {refill}, this run does not show" + suffix)


def probe(spec, budget):
    """The 0-dim index raises on its line; a cut factor, penalty or state is
    built without the graph its source carries; a kept alias shares the
    source's storage after the run."""
    message = spec["message"]
    if "invalid index of a 0-dim tensor" in message:
        return _ZERO_DIM(spec, budget)
    if "is kept as" in message:
        return _kept(spec, budget)
    if "cuts the state the loop carries" in message:
        return _cut(spec, budget, "state")
    if "loss term built from it is a constant" in message:
        return _cut(spec, budget, "dead")
    return _cut(spec, budget, "factor")
