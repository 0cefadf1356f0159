from __future__ import annotations

import libcst as cst

from detachlint.analysis.variable_calls import CHANGES_COMPUTATION, Effect, keyword, variable_effect
from detachlint.analysis.vocabulary import VARIABLE_CLASSES
from detachlint.rule import Invalid, Replace, Rule

_IMPORTED = tuple(sorted(VARIABLE_CLASSES))


class VariableChangesComputation(Rule):
    """`torch.autograd.Variable(...)` that cuts a graph, or whose `volatile` flag no longer stops one.

    ## What it does
    Flags the calls of the deprecated `torch.autograd.Variable` that change
    what the program computes since torch 0.4: a `Variable(t)` of a tensor
    that carries a graph (`d_in = Variable(fake)` with `fake = generator(z)`),
    and a `volatile=` flag passed where autograd is on, by code that relies
    on it to skip the graph. A `Variable` that wraps data, and so does
    nothing, is DL702's (off by default).

    ## Why is this bad?
    Since torch 0.4 tensors carry autograd state themselves: `Variable(t)`
    returns `t.detach()`. For a tensor that requires grad that is a cut
    nobody sees: `Variable(fake)` stops every gradient towards the generator
    that made `fake`. The keyword that used to matter, `volatile=True`, is
    ignored with a warning: evaluation code that relied on it builds a full
    autograd graph for every batch and keeps its activations alive, exactly
    as if no `torch.no_grad()` were there.

    ## Example
    ```python
    import torch
    from torch.autograd import Variable

    def evaluate(model, loader):
        model.eval()
        for images, labels in loader:
            images = Variable(images, volatile=True)
            outputs = model(images)
    ```

    Use instead:
    ```python
    import torch

    def evaluate(model, loader):
        model.eval()
        with torch.no_grad():
            for images, labels in loader:
                outputs = model(images)
    ```

    ## Not flagged
    - `Variable(x)` of data (a batch from a loader, a fresh tensor): it does
      nothing; DL702 reports it when enabled.
    - `volatile=True` where autograd is already off (inside `no_grad`).
    - `volatile=True` on a value no model reads as its only input with a
      graph: a label or constant that meets the model's output in a loss or
      a metric, where the graph is built either way (DL702 reports it).
    - `Variable` used as a type (`isinstance(x, Variable)`, annotations),
      a `Variable` class of the file's own or from another library.

    ## Fix safety
    A cut is fixed by writing what the wrapper did, `fake.detach()`, which
    keeps the cut visible: drop it if gradients were meant to flow. The
    `from torch.autograd import Variable` goes with the last use it had.
    Calls with `volatile=` are not fixed: the evaluation code needs a
    `torch.no_grad()` block, which only a person can place.

    ## Verification
    The probe watches the `Variable(...)` call as the code runs: the tensor
    it wraps and the one it returns. A cut is confirmed when the wrapped
    tensor required grad and the result does not, refuted when the wrapped
    tensor carried no graph. With `volatile=`: confirmed when the call warns,
    autograd is on and the next model call records a graph; refuted when
    autograd is off there. A wrapped tensor the reproduction made up for a
    function's argument gives `inconclusive`: the callers decide what it
    holds.

    ## References
    - PyTorch 0.4.0 migration guide: "Merging Tensor and Variable classes",
      "Deprecation of volatile flag".
    """

    code = "DL701"
    name = "variable-changes-computation"
    fix_title = "Write the `detach()` the wrapper did"
    message = "{detail}"
    harm = "wrong-gradients"

    valid = [
        # The label is volatile, but the loss's graph comes from the images' forward either way
        # (the forward is what wastes memory here: DL301's).
        """
        import torch
        from torch.autograd import Variable

        def evaluate(model, loader, criterion):
            total = 0.0
            for images, labels in loader:
                labels = Variable(labels, volatile=True)
                outputs = model(Variable(images))
                total += criterion(outputs, labels).item()
            return total
        """,
        # A batch from a loader: the wrapper does nothing (DL702's).
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
        # `volatile=True` inside `no_grad`: autograd is off either way.
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
        # isinstance checks and a Variable of another library.
        """
        import torch
        from torch.autograd import Variable
        from tensorflow import Variable as TFVariable

        def to_numpy(x):
            if isinstance(x, Variable):
                x = x.detach()
            return TFVariable(x.cpu().numpy())
        """,
    ]

    invalid = [
        Invalid(
            """
            import torch
            from torch.autograd import Variable

            def evaluate(model, loader):
                model.eval()
                for images, labels in loader:
                    images = Variable(images, volatile=True)
                    outputs = model(images)
            """,
            line=7,
            column=18,
            message="`volatile=True` has done nothing since torch 0.4",
        ),
        Invalid(
            """
            import torch
            from torch.autograd import Variable

            def run_epoch(model, loader, train):
                for images, labels in loader:
                    images = Variable(images, volatile=not train)
                    outputs = model(images)
            """,
            line=6,
            column=18,
            message="`volatile=not train` has done nothing since torch 0.4: when `not train` is true",
        ),
        # A generated image wrapped for the discriminator: the wrapper detaches it.
        Invalid(
            """
            import torch
            from torch import nn
            from torch.autograd import Variable

            def generator_step(G, D, z, g_optimizer):
                fake = G(z)
                d_in = Variable(fake)
                g_loss = -D(d_in).mean()
                g_optimizer.zero_grad()
                g_loss.backward()
                g_optimizer.step()
            """,
            line=7,
            message="`Variable(fake)` cuts the graph: since torch 0.4 it returns `fake.detach()`",
            fixed="""
            import torch
            from torch import nn

            def generator_step(G, D, z, g_optimizer):
                fake = G(z)
                d_in = fake.detach()
                g_loss = -D(d_in).mean()
                g_optimizer.zero_grad()
                g_loss.backward()
                g_optimizer.step()
            """,
        ),
        # A module's output at module level, through an alias of the module.
        Invalid(
            """
            import torch
            from torch import nn
            import torch.autograd as ag

            encoder = nn.Linear(4, 2)
            opt = torch.optim.SGD(encoder.parameters(), lr=0.1)
            for _ in range(3):
                code = ag.Variable(encoder(torch.randn(8, 4)))
                loss = (code ** 2).mean()
            """,
            line=8,
            message="`ag.Variable(encoder(torch.randn(8, 4)))` cuts the graph",
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        effect = variable_effect(self.facts, node)
        if effect not in CHANGES_COMPUTATION:
            return
        call = self.facts.module.code_for_node(node)
        if effect is Effect.VOLATILE:
            self.report(node, harm="waste", detail=f"`volatile=True` has done nothing since torch 0.4: `{call}` builds the autograd graph; use `torch.no_grad()`")
        elif effect is Effect.VOLATILE_FLAG:
            flag = self.facts.module.code_for_node(keyword(node, "volatile").value)
            self.report(node, harm="waste", detail=f"`volatile={flag}` has done nothing since torch 0.4: when `{flag}` is true, `{call}` still builds the autograd graph; use `torch.no_grad()`")
        else:
            tensor = node.args[0].value
            wrapped = self.facts.module.code_for_node(tensor)
            detail = (
                f"`{call}` cuts the graph: since torch 0.4 it returns `{wrapped}.detach()`, so no gradient flows back "
                f"through it into what computed `{wrapped}`; write `.detach()` if the cut is meant, else use `{wrapped}` itself"
            )
            fix = None
            if len(node.args) == 1 and node.args[0].keyword is None:
                fix = Replace(node, cst.Call(cst.Attribute(tensor, cst.Name("detach"))), drop_unused=_IMPORTED)
            self.report(node, fix=fix, detail=detail)
