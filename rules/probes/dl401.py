"""The probe of DL401 (loss accumulated with its graph).

Autograd nodes reachable from the accumulator after each iteration: the
hazard is a count that grows every time.
"""

import ast

import torch

from detachlint.verify.runtime.standins import Enough, Inconclusive, tensors_in
from detachlint.verify.runtime.observe import notes
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


def probe(spec, budget):
    """After each run of the accumulation, count the autograd nodes reachable
    from the accumulator: confirmed when the count grows every iteration."""
    counts = []
    described = {}

    def observe(value):
        counts.append(count_nodes(value))
        if len(counts) >= 3:
            raise Enough()

    def after(statement):
        target = _accumulator(statement)
        if target is None:
            return []
        described["text"] = ast.unparse(target) if hasattr(ast, "unparse") else "the accumulator"
        load = ast.parse(ast.unparse(target), mode="eval").body
        return [ast.Expr(ast.Call(ast.Name("__dl_observe__", ast.Load()), [load], []))]

    try:
        run = find_working(spec, after=after, helpers={"__dl_observe__": observe}, budget=budget)
    except Inconclusive:
        if len(counts) < 2:
            raise
        run = None  # it ran to the line before failing: what it saw stands
    name = described.get("text", "the accumulator")
    if len(counts) < 2:
        raise Inconclusive(f"the accumulation ran {len(counts)} time with synthesized inputs; growth needs two or more")
    suffix = notes(run) if run is not None else ""
    series = ", ".join(str(c) for c in counts)
    details = {"graph_nodes": list(counts), "accumulator": name}
    if all(b > a for a, b in zip(counts, counts[1:])):
        return "confirmed", f"autograd nodes reachable from `{name}` after iterations 1-{len(counts)}: {series}" + suffix, details
    if counts[-1] == 0:
        return "refuted", f"`{name}` holds no autograd graph (nodes after each iteration: {series})" + suffix, details
    return "refuted", f"the graph reachable from `{name}` does not grow: {series} nodes after iterations 1-{len(counts)}" + suffix, details

