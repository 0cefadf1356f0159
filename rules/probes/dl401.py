"""The probe of DL401 (loss accumulated with its graph).

Autograd nodes reachable from the accumulator after each iteration: the
hazard is a count that grows every time.
"""

import ast
import re

import torch
from torch import nn

from detachlint.verify.runtime.standins import Enough, Inconclusive, tensors_in
from detachlint.verify.runtime.observe import describe_error, notes, running_attempt
from detachlint.verify.runtime.user_code import find_working


def count_nodes(value):
    """Autograd nodes reachable from the tensors in `value`."""
    roots = [t.grad_fn for t in tensors_in(value) if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    seen, keep, todo = set(), [], list(roots)
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        keep.append(node)
        for child, _ in getattr(node, "next_functions", ()):
            if child is not None:
                todo.append(child)
    return len(seen)


def _accumulator(statement):
    """The expression an accumulation statement grows."""
    if isinstance(statement, ast.AugAssign):
        return statement.target
    if isinstance(statement, ast.Assign):
        return statement.targets[0]
    for node in ast.walk(statement):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
            "append", "extend", "insert", "add", "update", "__setitem__", "setdefault",
        ):
            return node.func.value
    return None


def _receiver_state(statement, message):
    """`(expression, exact)` for `tracker.update_losses(loss)`, whose method
    adds the loss to the object's own state: the attribute the finding names
    (`which adds it to `self.sums[key]``), else the whole object (exact False)."""
    call = statement.value if isinstance(statement, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)):
        return None, False
    receiver = call.func.value
    named = re.search(r"which adds it to `self\.(\w+)", message)
    if named is None:
        return receiver, False
    return ast.Attribute(receiver, named.group(1), ast.Load()), True


def probe(spec, budget):
    """After each run of the accumulation, count the autograd nodes reachable
    from the accumulator: confirmed when the count grows every iteration."""
    counts = []
    described = {}

    by_key = {}

    def observe(value, *key):
        run = running_attempt()
        if described.get("run") is not run:
            # A new attempt: what an earlier one saw does not count.
            counts.clear()
            by_key.clear()
            described["run"] = run
        if isinstance(value, nn.Module):
            value = vars(value)  # its attributes: parameters are leaves, with no graph
        if key:
            # `total[name] += loss`: each entry grows on its own, once per outer iteration.
            try:
                series = by_key.setdefault(key[0], [])
            except TypeError:
                series = by_key.setdefault(repr(key[0]), [])
            series.append(count_nodes(value))
            if len(series) > len(counts):
                counts[:] = series
                described["key"] = key[0]
        else:
            counts.append(count_nodes(value))
        if len(counts) >= 3:
            raise Enough()

    def after(statement):
        target = _accumulator(statement)
        if target is None:
            target, exact = _receiver_state(statement, spec["message"])
            described["whole"] = not exact
        if target is None:
            return []
        described["text"] = ast.unparse(target) if hasattr(ast, "unparse") else "the accumulator"
        load = ast.parse(ast.unparse(target), mode="eval").body
        arguments = [load]
        if isinstance(target, ast.Subscript) and not isinstance(target.slice, ast.Constant):
            # `total[name]`: each run may read another entry; the key, read again
            # when that has no side effect, tells them apart.
            if all(isinstance(n, (ast.Name, ast.Attribute, ast.Constant, ast.Tuple, ast.Load)) for n in ast.walk(target.slice)):
                arguments.append(ast.parse(ast.unparse(target.slice), mode="eval").body)
            else:
                described["whole"] = True
        return [ast.Expr(ast.Call(ast.Name("__dl_observe__", ast.Load()), arguments, []))]

    try:
        # Growth needs two runs of the accumulation: a call that makes one
        # (`train_step(batch)`) gives way to the program's loop around it.
        run = find_working(spec, after=after, helpers={"__dl_observe__": observe}, budget=budget, accept=lambda run: len(counts) >= 2)
    except Inconclusive:
        if len(counts) < 2:
            raise
        # It ran to the line before failing: what it saw stands, on what that run stood in.
        run = described.get("run")
    name = described.get("text", "the accumulator")
    if "text" not in described:
        raise Inconclusive("the finding's statement names no accumulator the probe can read after it runs")
    if len(counts) < 2:
        if run is not None and run.error is not None:
            done = "never completed: " if not counts else "ran once, then "
            raise Inconclusive(f"the accumulation {done}" + describe_error(run.error, spec, run))
        times = "never" if not counts else "once"
        raise Inconclusive(f"the accumulation ran {times} with synthesized inputs; growth needs two or more")
    suffix = notes(run) if run is not None else ""
    growing = [(key, series) for key, series in by_key.items() if len(series) >= 2 and all(b > a for a, b in zip(series, series[1:]))]
    if growing and not all(b > a for a, b in zip(counts, counts[1:])):
        # Another entry grows: what one entry keeps is enough.
        described["key"], counts = growing[0][0], growing[0][1]
    # The entry that ran most often (or one that grows): one entry's series, across iterations.
    entry = f" (the entry for {described['key']!r})" if "key" in described else ""
    series = ", ".join(str(c) for c in counts)
    details = {"graph_nodes": list(counts), "accumulator": name}
    if all(b > a for a, b in zip(counts, counts[1:])):
        return "confirmed", f"autograd nodes reachable from `{name}`{entry} after iterations 1-{len(counts)}: {series}" + suffix, details
    fell = next((i for i in range(2, len(counts)) if counts[i] < counts[i - 1]), None)
    if fell is not None and all(b > a for a, b in zip(counts[:fell], counts[1:fell])):
        # The accumulator was set anew (a loop started again): the growth before that stands.
        return "confirmed", f"autograd nodes reachable from `{name}`{entry} after iterations 1-{fell}: {', '.join(str(c) for c in counts[:fell])}, then {counts[fell]} after iteration {fell + 1}" + suffix, details
    if described.get("whole"):
        # What the method keeps may sit where reading the object does not reach.
        raise Inconclusive(f"the autograd nodes reachable from `{name}`{entry} do not grow: {series} after iterations 1-{len(counts)}" + suffix)
    if counts[-1] == 0:
        return "refuted", f"`{name}`{entry} holds no autograd graph (nodes after each iteration: {series})" + suffix, details
    return "refuted", f"the graph reachable from `{name}`{entry} does not grow: {series} nodes after iterations 1-{len(counts)}" + suffix, details
