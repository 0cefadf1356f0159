"""The probe of DL502 (in-place edit of a leaf parameter).

The statement on the finding's line raises the RuntimeError the finding
names; refuted when it runs through. When the statement edits an argument
the reproduction would have to make up (`E[:, 0::2] = ...` in
`create_embeddings(E)`), the file's own class that calls the function
(`create_embeddings(E=self.pos.weight)` in its `__init__`) runs instead:
it passes the program's tensor. That run can confirm; running through
there refutes nothing, since other calls may pass other tensors.
"""

import ast
import textwrap

from detachlint.verify.runtime.shared_probes import raises_on_its_line
from detachlint.verify.runtime.standins import Inconclusive

_raises = raises_on_its_line("a leaf Variable that requires grad is being used in an in-place operation")


def _calling_methods(spec):
    """`(class, method)` of the file's classes whose methods call the target
    function by name, constructors first (building the class runs them)."""
    target = spec["target"]
    if target.get("kind") != "function" or target.get("class") or target.get("script"):
        return []
    found = []
    for block in spec["blocks"]:
        if block.get("script") or block.get("call_site"):
            continue
        try:
            tree = ast.parse(textwrap.dedent(block["text"]))
        except SyntaxError:
            continue
        for node in tree.body:
            if not isinstance(node, ast.ClassDef):
                continue
            for method in node.body:
                if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                calls = any(
                    isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == target["function"]
                    for call in ast.walk(method)
                )
                if calls:
                    found.append((method.name != "__init__", node.name, method.name))
    return [(cls, method) for _, cls, method in sorted(found)][:2]


def probe(spec, budget):
    """The statement raises the leaf in-place error, run as the file runs it."""
    try:
        return _raises(spec, budget)
    except Inconclusive as error:
        if "an argument the reproduction synthesized" not in str(error):
            raise
        made_up = error
    for cls, method in _calling_methods(spec):
        # The class passes the program's own tensor: its verdict stands for the program.
        caller = dict(spec, target={"kind": "method", "class": cls, "function": method})
        caller.pop("call_site", None)
        through = f" (run through `{cls}.{method}`, which calls `{spec['target']['function']}`)"
        try:
            status, evidence = _raises(caller, budget)[:2]
        except Inconclusive as error:
            made_up = Inconclusive(f"{error}{through}")
            continue
        if status == "refuted":
            # Other calls of the function may pass other tensors: one running through refutes nothing.
            made_up = Inconclusive(f"{evidence}{through}; other calls of `{spec['target']['function']}` may pass other tensors")
            continue
        return status, evidence + through
    raise made_up
