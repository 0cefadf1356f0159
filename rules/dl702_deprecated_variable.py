from __future__ import annotations

from typing import Optional

import libcst as cst

from detachlint.analysis.variable_calls import CHANGES_COMPUTATION, Effect, carries_no_graph, variable_effect
from detachlint.analysis.variable_calls import is_false as _is_false
from detachlint.analysis.variable_calls import is_true as _is_true
from detachlint.analysis.variable_calls import keyword as _keyword
from detachlint.analysis.vocabulary import FACTORIES, VARIABLE_CLASSES
from detachlint.rule import Invalid, Replace, Rule

_IMPORTED = tuple(sorted(VARIABLE_CLASSES))


def _method(receiver: cst.BaseExpression, name: str) -> cst.Call:
    return cst.Call(cst.Attribute(receiver, cst.Name(name)))


class DeprecatedVariable(Rule):
    """`torch.autograd.Variable(...)` that changes nothing: a deprecated wrapper to drop (off by default).

    ## What it does
    Flags the calls of `torch.autograd.Variable`, however it is imported,
    that do not change what the program computes: a wrapper around data
    (`Variable(images)` of a batch, of a fresh tensor), one that makes a new
    leaf (`Variable(torch.zeros(3), requires_grad=True)`), a wrapper that
    passes its arguments on, a wrapped value the analysis cannot see, and a
    `volatile=True` where autograd is already off. It is a modernisation
    rule, off by default: enable it with `--extend-select DL702` to clean up
    2017-era code. The calls that do change what is computed (a cut of a
    graph, `volatile` relied on with autograd on) are DL701's.

    ## Why is this bad?
    Since torch 0.4, tensors carry autograd state themselves: `Variable(t)`
    returns `t.detach()`, an alias of `t` that does not require grad, and
    `Variable(t, requires_grad=True)` a new leaf sharing its storage. Around
    a batch that is harmless, but the wrapper hides which tensors need grad
    and which do not, and the next reader cannot tell a cut from a no-op.

    ## Example
    ```python
    import torch
    from torch.autograd import Variable

    def train(model, loader, optimizer, criterion):
        for x, y in loader:
            x, y = Variable(x), Variable(y)
            loss = criterion(model(x), y)
    ```

    Use instead:
    ```python
    import torch

    def train(model, loader, optimizer, criterion):
        for x, y in loader:
            loss = criterion(model(x), y)
    ```

    ## Not flagged
    - A `Variable(...)` that cuts a graph, or a `volatile=` flag with
      autograd on: DL701 reports those.
    - `Variable` used as a type (`isinstance(x, Variable)`, annotations):
      still valid, it checks for a tensor.
    - A `Variable` class of the file's own, or from another library.

    ## Fix safety
    The fix writes what the wrapper did, so it is safe: `Variable(x)`
    becomes `x.detach()`, or plain `x` when the analysis knows `x` carries
    no graph (a batch, a factory without `requires_grad`, a detached value;
    and `x = Variable(x)` then goes, unless a comment is attached to it).
    `Variable(x, requires_grad=True)` becomes `x.requires_grad_()` when `x`
    is a fresh factory call (`torch.zeros(...)`), else
    `x.detach().requires_grad_()`. The `from torch.autograd import Variable`
    goes with the last use it had. Where what `x` holds is not known here,
    `x.detach()` keeps the possible cut visible: drop it if gradients were
    meant to flow. Calls with `volatile=` or other positional arguments are
    not fixed.

    ## Verification
    The probe watches the `Variable(...)` call as the code runs: the tensor
    it wraps and the one it returns (graph, leaf, shared storage). A cut is
    confirmed when the wrapped tensor required grad and the result does
    not; "does nothing" when the wrapped tensor carried no graph and the
    result shares its storage, refuted when it did carry one; a new leaf
    when the result is a leaf that requires grad and shares the storage.
    A wrapped tensor the reproduction made up for a function's argument
    gives `inconclusive`: the callers decide what it holds. A batch of the
    program's own data source (a loader or dataset the script builds from
    files and iterates, or a function reads as a module-level global; also
    the samples such a dataset holds whole, read as `dataset.data[:100]`;
    synthesized in the reproduction) is different: the program's batches
    carry no graph either, so "does nothing", "makes a new leaf" and
    "returns `x.detach()`" are decided on it as observed; a claimed cut is
    not. "Returns `x.detach()`" is also decided on a value the code
    computed (`Tensor(n, 1).fill_(1.0)`, `h.data.new(...)`) when it carries
    no graph even after a second run in which every synthesized input
    requires grad (but the data sources' batches, which carry no graph in
    the program either): its lack of a graph is then the program's own.
    When the first run had made up no input by the time the code started
    (and ran with autograd on), that second run would be the same run, so
    it is not made: the first run's observation stands for it. A batch
    of the data source rests on the user's code even where the run stood in
    for other parts of the program (a model loaded from a file): the
    wrapped tensor has the batch's own storage, which no stand-in computed;
    a forced branch or a made-up configuration value still makes the
    verdict a stand-in's.
    A call inside a lambda the file binds at module level (`Variable =
    lambda *args: autograd.Variable(*args).cuda() if USE_CUDA else ...`) is
    judged on the file's own calls of the lambda: the script runs from the
    first later top-level statement that calls it (itself or through the
    file's functions and methods), and the probe watches every call it makes
    (up to a few dozen). A call that wrapped a tensor with a graph and
    returned one without confirms the cut; when every call returned the
    `.detach()` of a tensor with no graph (also after the second run above),
    "returns `x.detach()`" is confirmed: here the wrapper does nothing. A
    call the lambda never made (a branch not taken on the worker's CPU)
    stays inconclusive.
    With `volatile=True`: confirmed when the call warns, autograd is on and
    the next model call records a graph; refuted when autograd is off there.

    ## References
    - PyTorch 0.4.0 migration guide: "Merging Tensor and Variable classes",
      "Deprecation of volatile flag".
    """

    code = "DL702"
    name = "deprecated-variable"
    fix_title = "Drop the `Variable` wrapper"
    message = "{detail}"
    harm = "style"
    default_enabled = False

    valid = [
        # isinstance checks and annotations still work.
        """
        import torch
        from torch.autograd import Variable

        def to_numpy(x: Variable):
            if isinstance(x, Variable):
                x = x.detach()
            return x.cpu().numpy()
        """,
        # A Variable of the file's own.
        """
        import torch

        class Variable:
            def __init__(self, name):
                self.name = name

        x = Variable("lr")
        """,
        # Another library's Variable.
        """
        import torch
        from tensorflow import Variable

        w = Variable(torch.zeros(3).numpy())
        """,
        # A cut of a generator's output: DL701's.
        """
        import torch
        from torch.autograd import Variable

        def generator_step(G, D, z, g_optimizer):
            fake = G(z)
            g_loss = -D(Variable(fake)).mean()
            g_optimizer.zero_grad()
            g_loss.backward()
            g_optimizer.step()
        """,
        # Plain tensors, the modern spelling.
        """
        import torch

        w = torch.zeros(3, requires_grad=True)
        x = torch.randn(8, 3)
        """,
    ]

    invalid = [
        # A wrapper passing its arguments on: the message names no tensor of its own.
        Invalid(
            """
            from torch import autograd

            USE_CUDA = False
            Variable = lambda *args, **kwargs: autograd.Variable(*args, **kwargs).cuda() if USE_CUDA else autograd.Variable(*args, **kwargs)
            """,
            line=4,
            column=36,
            message="`autograd.Variable(*args, **kwargs)` is deprecated since torch 0.4: it returns the `.detach()` of the tensor it is given",
        ),
        Invalid(
            """
            import torch
            from torch.autograd import Variable

            def train(model, loader, optimizer, criterion):
                for x, y in loader:
                    x, y = Variable(x), Variable(y)
                    loss = criterion(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
            line=6,
            column=16,
            message="`Variable(x)` does nothing since torch 0.4 to a tensor that carries no graph",
            fixed="""
            import torch

            def train(model, loader, optimizer, criterion):
                for x, y in loader:
                    loss = criterion(model(x), y)
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
            """,
        ),
        Invalid(
            """
            import torch

            z = torch.autograd.Variable(torch.randn(16, 100), requires_grad=True)
            """,
            line=3,
            fixed="""
            import torch

            z = torch.randn(16, 100).requires_grad_()
            """,
        ),
        Invalid(
            """
            import torch.autograd as autograd

            def perturb(images):
                delta = autograd.Variable(images.new_zeros(images.shape), requires_grad=True)
                return delta
            """,
            line=4,
            fixed="""
            import torch.autograd as autograd

            def perturb(images):
                delta = images.new_zeros(images.shape).detach().requires_grad_()
                return delta
            """,
        ),
        # `volatile=True` where autograd is already off.
        Invalid(
            """
            import torch
            from torch.autograd import Variable

            def evaluate(model, loader):
                model.eval()
                with torch.no_grad():
                    for images, labels in loader:
                        images = Variable(images, volatile=True)
                        outputs = model(images)
            """,
            line=8,
            message="`volatile=True` does nothing here: autograd is already off",
        ),
        # What the tensor holds is not known here: the fix keeps the detach.
        Invalid(
            """
            import torch
            from torch.autograd import Variable

            def wrap(t):
                return Variable(t)
            """,
            line=5,
            message="`Variable(t)` is deprecated since torch 0.4 and returns `t.detach()`",
            fixed="""
            import torch

            def wrap(t):
                return t.detach()
            """,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        effect = variable_effect(self.facts, node)
        if effect is None or effect in CHANGES_COMPUTATION:
            return
        call = self.facts.module.code_for_node(node)
        if effect is Effect.VOLATILE_UNDER_NO_GRAD:
            flag = self.facts.module.code_for_node(_keyword(node, "volatile").value)
            self.report(node, detail=f"`volatile={flag}` does nothing here: autograd is already off where `{call}` runs, and the flag has been ignored since torch 0.4")
            return
        if effect is Effect.VOLATILE_UNREAD:
            flag = self.facts.module.code_for_node(_keyword(node, "volatile").value)
            self.report(
                node,
                detail=f"`volatile={flag}` has been ignored since torch 0.4, and here no model reads `{call}` as its only input with a graph (a label, a constant): drop the wrapper",
            )
            return
        data = node.args[0]
        wrapped = self.facts.module.code_for_node(data.value)
        if effect is Effect.FORWARDED:
            # `Variable(*args, **kwargs)` in a wrapper: what it wraps is the caller's.
            detail = (
                f"`{call}` is deprecated since torch 0.4: it returns the `.detach()` of the tensor it is given "
                f"(a new leaf sharing its storage with `requires_grad=True`), so no gradient flows back through it"
            )
        elif effect is Effect.NEW_LEAF:
            detail = f"`{call}`: `Variable` is deprecated since torch 0.4; it makes a new leaf that shares `{wrapped}`'s storage"
        elif effect is Effect.NO_GRAPH:
            detail = f"`{call}` does nothing since torch 0.4 to a tensor that carries no graph: use `{wrapped}` itself"
        else:
            detail = (
                f"`{call}` is deprecated since torch 0.4 and returns `{wrapped}.detach()`: "
                f"if `{wrapped}` requires grad, no gradient flows back through it"
            )
        self.report(node, fix=self._fix(node), detail=detail)

    def _carries_no_graph(self, tensor: cst.BaseExpression) -> bool:
        return carries_no_graph(self.facts, tensor)

    def _fix(self, node: cst.Call) -> Optional[Replace]:
        data, *rest = node.args
        if data.keyword is not None or data.star:
            return None
        requires_grad = _keyword(node, "requires_grad")
        volatile = _keyword(node, "volatile")
        if any(arg not in (requires_grad, volatile) for arg in rest):
            return None  # positional flags or other keywords: leave to a person
        if volatile is not None and not _is_false(volatile):
            return None
        tensor = data.value
        if requires_grad is None or _is_false(requires_grad):
            if not self._carries_no_graph(tensor):
                # What the wrapper did, made visible.
                return Replace(node, _method(tensor, "detach"), drop_unused=_IMPORTED)
            statement = self._self_assignment(node)
            if statement is not None:  # `x = Variable(x)` goes, rather than becoming `x = x`
                return Replace(statement, cst.RemovalSentinel.REMOVE, drop_unused=_IMPORTED)
            return Replace(node, tensor, drop_unused=_IMPORTED)
        if not _is_true(requires_grad):
            return None
        # A fresh factory result has no other holder: making it a leaf in place is the same.
        factory = self.facts.names.call_name(tensor) or ""
        if factory.startswith("torch.") and factory.rpartition(".")[2] in FACTORIES:
            return Replace(node, _method(tensor, "requires_grad_"), drop_unused=_IMPORTED)
        return Replace(node, _method(_method(tensor, "detach"), "requires_grad_"), drop_unused=_IMPORTED)

    def _self_assignment(self, node: cst.Call) -> Optional[cst.SimpleStatementLine]:
        """The statement line when it only rebinds names to their own plain
        wrapped values: `x = Variable(x)`, `x, y = Variable(x), Variable(y)`."""
        index = self.facts.index
        value: cst.CSTNode = node
        parent = index.parent(node)
        if isinstance(parent, cst.Element):
            value = index.parent(parent)
            parent = index.parent(value)
        if not isinstance(parent, cst.Assign) or len(parent.targets) != 1 or parent.value is not value:
            return None
        target = parent.targets[0].target
        pairs = [(target, value)]
        if isinstance(value, cst.Tuple) and isinstance(target, cst.Tuple) and len(target.elements) == len(value.elements):
            pairs = [(t.value, v.value) for t, v in zip(target.elements, value.elements)]
        for name, call in pairs:
            if not (
                isinstance(name, cst.Name)
                and isinstance(call, cst.Call)
                and self.facts.names.qualified(call.func) in VARIABLE_CLASSES
                and len(call.args) == 1
                and call.args[0].keyword is None
                and not call.args[0].star
                and isinstance(call.args[0].value, cst.Name)
                and call.args[0].value.value == name.value
                and self._carries_no_graph(call.args[0].value)
            ):
                return None
        line = index.parent(parent)
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            return None
        # A comment on or above the line would go with it: keep the line then.
        if line.trailing_whitespace.comment is not None or any(empty.comment for empty in line.leading_lines):
            return None
        return line
