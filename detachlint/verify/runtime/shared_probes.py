"""Probes that several rules share.

`raises_on_its_line(expected)` makes the probe of a rule whose finding says
the statement raises (DL302, DL502, DL504); `probe_graphless_term` is the
probe of DL202 and DL303, whose findings both say a value carries no graph.
A probe used by one rule only lives beside that rule, in `rules/probes/`.
"""

import ast
import re

import torch
from torch import nn

from detachlint.verify.runtime.standins import Inconclusive, tensors_in, walk
from detachlint.verify.runtime.observe import (
    BASIS,
    passed_through,
    describe_error,
    notes,
    running_attempt,
    statement_error,
    statement_lines,
    user_line,
    watching_backward,
)
from detachlint.verify.runtime.user_code import attempt, find_working, grad_off_required


def _done_marker(statement):
    return ast.parse("__dl_done__()").body


def raises_on_its_line(expected):
    """A probe for a rule whose finding says the statement raises: run to the
    statement; confirmed when it raised the RuntimeError the message names,
    refuted when it ran through."""

    def probe(spec, budget):
        done = []
        first, last = statement_lines(spec)
        run = find_working(spec, after=_done_marker, helpers={"__dl_done__": lambda: done.append(True)}, budget=budget)
        error, caught = statement_error(run)
        mode, how = _callers_mode(spec), ""
        if done and mode is not None:
            # The finding says a caller runs this code with autograd off: run it so.
            done.clear()
            run = find_working(spec, after=_done_marker, helpers={"__dl_done__": lambda: done.append(True)}, budget=budget, around=mode[1])
            how = mode[0]
            if "from import on" not in how:
                # (A module-level switch is the program's own state, not a stand-in.)
                BASIS["stand_ins"].append(how)
            how = f" ({how})"
            error, caught = statement_error(run)
        # Checked first: a statement that ran through once may raise on a later pass.
        if error is not None and passed_through(error, spec, first, last):
            text = str(error).strip().splitlines()[0] if str(error).strip() else ""
            if expected in text:
                inner = user_line(error, spec)
                where = f" (in the call it makes, line {inner})" if inner is not None and not first <= inner <= last else ""
                return "confirmed", f"the statement raised {type(error).__name__}: {text}{where}{caught}" + notes(run) + how
        if done:
            argument = _synthesized_argument(spec, run)
            if argument is not None:
                # A tensor the verifier made stands for what the callers pass: it says nothing.
                raise Inconclusive(
                    f"the statement ran without raising on `{argument}`, an argument the reproduction synthesized; the file's callers decide what it holds" + notes(run)
                )
            outside = _grad_off_outside(spec, run)
            if outside is not None:
                raise Inconclusive(
                    f"the statement ran without raising, but the finding's autograd-off region (line {outside}) lies outside the code the reproduction ran" + notes(run)
                )
            return "refuted", "the statement ran without raising" + notes(run) + how
        if error is not None:
            raise Inconclusive(describe_error(error, spec, run))
        raise Inconclusive("the statement never finished with synthesized inputs")

    probe.__doc__ = f'The statement on the finding\'s line raises "{expected}".'
    return probe


def _synthesized_argument(spec, run):
    """The parameter of the function the reproduction called with synthesized
    arguments that the statement edits in place (`E[:, 0::2] = ...`); None otherwise."""
    target = spec["target"]
    if run.user is None or getattr(run.plan, "call_site", False) or not target.get("function"):
        return None
    node = run.user.find_function(target["function"], target.get("class"))
    if node is None:
        return None
    parameters = {a.arg for a in node.args.args + node.args.kwonlyargs} - {"self", "cls"}
    for statement in walk(node):
        if not isinstance(statement, ast.stmt) or statement.lineno != spec["line"]:
            continue
        targets = getattr(statement, "targets", None) or [getattr(statement, "target", None) or getattr(statement, "value", None)]
        for edited in targets:
            while isinstance(edited, (ast.Subscript, ast.Attribute, ast.Call)):
                edited = edited.func if isinstance(edited, ast.Call) else edited.value
            if isinstance(edited, ast.Name) and edited.id in parameters:
                return edited.id
    return None


def _grad_off_outside(spec, run):
    """The line a finding says runs with autograd off (`... with autograd off (line 41)`)
    when it lies outside the function the reproduction ran (a module-level switch)."""
    match = re.search(r"autograd off \(line (\d+)\)", spec["message"])
    target = spec["target"]
    if match is None or run.user is None or not target.get("function"):
        return None
    node = run.user.find_function(target["function"], target.get("class"))
    line = int(match.group(1))
    if node is None or node.lineno <= line <= (node.end_lineno or node.lineno):
        return None
    return line


def _callers_mode(spec):
    """`(what the evidence says, context factory)` for the grad mode the code's
    callers set: one the finding names (`enable_grad()` does not lift
    `inference_mode()`), or a script-level `set_grad_enabled(False)`; or None."""
    if re.search(r"does not lift `(torch\.)?inference_mode\(\)`", spec["message"]):
        return "run under `torch.inference_mode()` as its caller does", torch.inference_mode
    line = spec.get("hints", {}).get("script_grad_off")
    if line is not None and spec["hints"].get("grad_off_on_import"):
        return f"run with autograd off, as the module's `torch.set_grad_enabled(False)` on line {line} leaves it from import on", lambda: torch.set_grad_enabled(False)
    if line is not None:
        return f"run with autograd off, as the script's `torch.set_grad_enabled(False)` on line {line} leaves it", lambda: torch.set_grad_enabled(False)
    return None


def _wrap_cut_term(value):
    """(`a + b.detach().item()` with the operand that holds a cut (`.detach()`,
    `.data`) wrapped in `__dl_cut_term__(...)`, that operand's text), when the
    value is a sum of terms and only one holds a cut; else (value, None)."""
    terms = []

    def collect(node):
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            collect(node.left)
            collect(node.right)
        else:
            terms.append(node)

    def cut(node):
        return (isinstance(node, ast.Attribute) and node.attr == "data") or (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "detach"
        )

    collect(value)
    with_cut = [t for t in terms if any(cut(n) for n in ast.walk(t))]
    if len(terms) < 2 or len(with_cut) != 1:
        return value, None
    wrapped = with_cut[0]
    text = ast.unparse(wrapped)

    class Wrap(ast.NodeTransformer):
        def visit(self, node):
            if node is wrapped:
                return ast.Call(ast.Name("__dl_cut_term__", ast.Load()), [node], [])
            return super().visit(node)

    return Wrap().visit(value), text


class _CutOperands(ast.NodeTransformer):
    """Wraps what each `.data` / `.detach()` of a statement is applied to in
    `__dl_before_cut__(...)`, so the run sees whether there was a graph to cut."""

    def __init__(self):
        self.texts = []

    def _wrapped(self, operand):
        self.texts.append(ast.unparse(operand))
        return ast.Call(ast.Name("__dl_before_cut__", ast.Load()), [operand], [])

    def visit_Attribute(self, node):
        self.generic_visit(node)
        if node.attr == "data" and isinstance(node.ctx, ast.Load):
            node.value = self._wrapped(node.value)
        return node

    def visit_Call(self, node):
        self.generic_visit(node)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "detach" and not node.args:
            node.func.value = self._wrapped(node.func.value)
        return node


_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def probe_graphless_term(spec, budget):
    """DL202 and DL303: the tensor assigned on the finding's line carries no
    graph (requires_grad False, no grad_fn), and the backward that follows
    raises "does not require grad" or runs on the loss's other terms only.
    Refuted as well when every `.data`/`.detach()` on the line was applied,
    with autograd on, to values that had no graph: the cut cut nothing, the
    value is plain data (a target, not a prediction)."""
    # Per attempt (id -> what it saw): the value and the backwards of one run
    # only, never one attempt's value with another's backward (a forced `if`).
    seen = {}
    names = {}
    cuts = _CutOperands()

    # DL303: the modules with trainable parameters the line's own call runs
    # (with autograd off): a call that runs none (a NumPy distance field
    # under `@torch.no_grad()`) keeps nothing from training.
    trained = {"handle": None}

    def modules_begin():
        entry = current()
        entry.setdefault("trainable_modules", 0)

        def hook(module, args, output):
            if any(p.requires_grad for p in module.parameters(recurse=False)):
                current()["trainable_modules"] += 1

        if trained["handle"] is None:
            trained["handle"] = nn.modules.module.register_module_forward_hook(hook)

    def modules_end():
        if trained["handle"] is not None:
            trained["handle"].remove()
            trained["handle"] = None

    def rewrite(statement):
        begin = ast.parse("__dl_modules_begin__()").body if spec["code"] == "DL303" and not isinstance(statement, _DEFINITIONS) else []
        if not isinstance(statement, ast.Assign):
            return begin + [statement]
        value, names["term"] = _wrap_cut_term(statement.value)
        statement.value = cuts.visit(value)
        return begin + [ast.fix_missing_locations(statement)]

    def term(value):
        # `loss = loss + t.detach().item()`: the term with the cut, not the sum.
        entry = current()
        if "term" not in entry:
            inner = [t for t in tensors_in(value) if t.is_floating_point()]
            entry["term"] = (any(t.requires_grad for t in inner), next((type(t.grad_fn).__name__ for t in inner if t.grad_fn), None))
        return value

    def before_cut(value):
        entry = current()
        graph = any(t.requires_grad for t in tensors_in(value))
        entry.setdefault("before_cut", []).append((graph, torch.is_grad_enabled()))
        return value

    def after(statement):
        end = ast.parse("__dl_modules_end__()").body if spec["code"] == "DL303" and not isinstance(statement, _DEFINITIONS) else []
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
            name = statement.targets[0].id
            names["name"] = name
            return end + [ast.parse(f"__dl_observe__({name})").body[0]]
        return end

    def current():
        run = running_attempt()
        return seen.setdefault(id(run), {"run": run, "backwards": []})

    def observe(value):
        entry = current()
        if "first" in entry:
            return
        if isinstance(value, torch.Tensor):
            entry["first"] = (value.requires_grad, type(value.grad_fn).__name__ if value.grad_fn else None)
            entry["tensors"] = [value]
            return
        # An output object (`generate(..., return_dict_in_generate=True)`): its
        # floating tensors; one with a graph carries it.
        inner = [t for t in tensors_in(value) if t.is_floating_point()]
        if inner:
            tracked = next((t for t in inner if t.requires_grad), None)
            entry["first"] = (tracked is not None, type(tracked.grad_fn).__name__ if tracked is not None and tracked.grad_fn else None)
            entry["tensors"] = inner
            entry["inner"] = len(inner)
            entry["mixed"] = tracked is not None and not all(t.requires_grad for t in inner)

    outcomes = []

    def when():
        entry = current()
        if "first" not in entry:
            return False
        entry["backwards"].append(len(outcomes))  # the index its outcome takes
        # The value as the backward finds it: code after the line may have
        # made it require grad (`z.requires_grad = True`, an optimised input).
        # Only a leaf made to require grad counts: an in-place `loss += term`
        # gives the value a graph without its own part getting any gradient.
        entry.setdefault("at_backward", any(t.requires_grad and t.grad_fn is None for t in entry.get("tensors", ())))
        return True

    helpers = {"__dl_observe__": observe, "__dl_before_cut__": before_cut, "__dl_cut_term__": term,
               "__dl_modules_begin__": modules_begin, "__dl_modules_end__": modules_end}
    with watching_backward(spec, when=when) as watched:
        outcomes = watched
        failed = None
        try:
            # Run to the end: the backward comes after the finding's line.
            run = find_working(spec, rewrite=rewrite, after=after, helpers=helpers, need_finish=True, budget=budget)
        except Inconclusive as reason:
            run, failed = None, reason
        entry = seen.get(id(run), {}) if run is not None else {}
        if not entry.get("backwards"):
            # An attempt whose backward after the line ran and stopped it (it
            # raised, as the program's may): that attempt tells. Run again under
            # its plan, so that the notes and configuration are its own.
            earlier = next((e for e in seen.values() if "first" in e and e["backwards"] and e["run"] is not None and e["run"] is not run), None)
            if earlier is not None:
                grad_off_line = grad_off_required(spec)
                again = attempt(spec, earlier["run"].plan, rewrite=rewrite, after=after, helpers=helpers, around=torch.no_grad if grad_off_line is not None else None)
                again.grad_off_line = grad_off_line
                if seen.get(id(again), {}).get("backwards"):
                    run, entry = again, seen[id(again)]
        if run is None:
            raise failed
    modules_end()  # a run that raised inside the line left its hook on
    suffix = notes(run) if run is not None else ""
    if "first" not in entry:
        raise Inconclusive("the value on this line was never a tensor with synthesized inputs")
    backwards = [outcomes[i] for i in entry["backwards"] if i < len(outcomes)]
    name = names.get("name", "the value")
    requires_grad, grad_fn = entry["first"]
    if "term" in entry:
        # The sum has the other terms' graph; the finding is about its cut term.
        requires_grad, grad_fn = entry["term"]
        name = names.get("term") or name
        entry.pop("inner", None), entry.pop("mixed", None)
    if entry.get("mixed"):
        # Which of them the loss uses decides; the run does not say.
        raise Inconclusive(f"some of the {entry['inner']} floating tensors in `{name}` require grad and some do not" + suffix)
    if requires_grad:
        held = f"each of the {entry['inner']} floating tensors in " if "inner" in entry else ""
        return "refuted", f"{held}`{name}` requires grad at run time (grad_fn={grad_fn}): the graph is there" + suffix
    before = entry.get("before_cut") or []
    if before and all(grad_on and not graph for graph, grad_on in before):
        what = " and ".join(f"`{text}`" for text in dict.fromkeys(cuts.texts))
        return "refuted", (
            f"{what} had no graph before the cut (no tensor in it required grad, with autograd on): "
            f"the cut removed nothing, `{name}` is plain data"
        ) + suffix
    if entry.get("trainable_modules") == 0:
        return "refuted", (
            f"the call on this line ran no module with trainable parameters: with autograd off it kept nothing "
            f"from training, and `{name}` is a constant the loss uses as it is"
        ) + suffix
    if entry.get("at_backward"):
        return "refuted", (
            f"`{name}` had no graph when the line ran, but was a leaf that required grad when the backward after "
            "it ran (set after the line): gradients reach it"
        ) + suffix
    state = f"`{name}`: requires_grad=False, grad_fn=None"
    if "inner" in entry:
        state = f"the {entry['inner']} floating tensor(s) in `{name}`: requires_grad=False, grad_fn=None"
    raised = next((message for message in backwards if message and "does not require grad" in message), None)
    if raised:
        return "confirmed", f"{state}; the backward after it raised RuntimeError: {raised}" + suffix
    if backwards:
        return "confirmed", f"{state}; the backward after it ran on the loss's other terms only, none of its gradient comes through `{name}`" + suffix
    stopped = f" ({describe_error(run.error, spec, run)})" if run is not None and run.error is not None else ""
    raise Inconclusive(f"{state}, but no backward ran after it with synthesized inputs{stopped}")
