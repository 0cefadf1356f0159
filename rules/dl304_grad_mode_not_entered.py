from __future__ import annotations

from typing import Optional

import libcst as cst

from detachlint.analysis.vocabulary import ENTERED_GRAD_MODE_MANAGERS
from detachlint.rule import Invalid, Replace, Rule


class GradModeNotEntered(Rule):
    """`torch.no_grad()` called as a statement, which changes nothing.

    ## What it does
    Flags `torch.no_grad()`, `torch.inference_mode()` and
    `torch.enable_grad()` written as a statement of their own: not in a
    `with`, not as a decorator.

    ## Why is this bad?
    These calls build a context manager; grad mode changes only when it is
    entered (`with torch.no_grad():`) or when it decorates a function. As a
    bare statement the object is thrown away at once, and the code after it
    runs with autograd exactly as before: evaluation keeps building graphs
    (memory, `.numpy()` raising "Can't call numpy() on Tensor that requires
    grad"), or the gradients the author wanted back stay off.
    `torch.set_grad_enabled(False)` is different: called as a function it
    does switch grad mode, and it is not flagged.

    ## Example
    ```python
    import torch

    def predict(model, x):
        model.eval()
        torch.no_grad()
        return model(x)
    ```

    Use instead:
    ```python
    import torch

    def predict(model, x):
        model.eval()
        with torch.no_grad():
            return model(x)
    ```

    ## Not flagged
    - `with torch.no_grad():`, `@torch.no_grad()`, `@torch.no_grad`.
    - `torch.set_grad_enabled(False)` as a statement: it switches grad mode.
    - A manager stored or passed on (`ctx = torch.no_grad()`,
      `stack.enter_context(torch.no_grad())`).

    ## Fix safety
    The fix puts the rest of the block, after the call, under
    `with <manager>():`. It is unsafe: how far the author meant the mode to
    reach is a guess, and the block's later statements change behaviour.

    ## Verification
    The probe runs the code past the statement and reads
    `torch.is_grad_enabled()` right after it: confirmed when autograd is
    still on.

    ## References
    - PyTorch docs, `torch.no_grad` and "Locally disabling gradient computation".
    """

    code = "DL304"
    name = "grad-mode-not-entered"
    message = "`{call}` as a statement builds a context manager and drops it: grad mode does not change for the code after it; use `with {call}:`"
    harm = "waste"
    default_enabled = True
    fix_title = "Put the rest of the block under `with`"

    valid = [
        """
        import torch

        def predict(model, x):
            with torch.no_grad():
                return model(x)
        """,
        """
        import torch

        @torch.no_grad()
        def predict(model, x):
            return model(x)
        """,
        # set_grad_enabled switches grad mode when called.
        """
        import torch

        torch.set_grad_enabled(False)
        """,
        # A manager kept for later.
        """
        import contextlib
        import torch

        def run(model, x, stack: contextlib.ExitStack):
            stack.enter_context(torch.no_grad())
            context = torch.inference_mode()
            with context:
                return model(x)
        """,
    ]

    invalid = [
        Invalid(
            """
            import torch

            def predict(model, x):
                model.eval()
                torch.no_grad()
                return model(x)
            """,
            line=5,
            message="`torch.no_grad()` as a statement builds a context manager and drops it",
            fixed="""
            import torch

            def predict(model, x):
                model.eval()
                with torch.no_grad():
                    return model(x)
            """,
        ),
        Invalid(
            """
            from torch.autograd import no_grad

            def evaluate(model, loader):
                model.eval()
                no_grad()
                return [model(x) for x, _ in loader]
            """,
            line=5,
            message="`no_grad()` as a statement",
        ),
        Invalid(
            """
            import torch

            torch.inference_mode()
            model = torch.nn.Linear(2, 2)
            """,
            line=3,
        ),
    ]

    def visit_Expr(self, node: cst.Expr) -> None:
        call = node.value
        if not isinstance(call, cst.Call):
            return
        if self.facts.names.qualified(call.func) not in ENTERED_GRAD_MODE_MANAGERS:
            return
        text = self.facts.module.code_for_node(call)
        self.report(call, fix=self._fix(node, call), call=text)

    def _fix(self, expr: cst.Expr, call: cst.Call) -> Optional[Replace]:
        """The rest of the block under `with call:`, when the call is a line of its own."""
        line = self.facts.index.parent(expr)
        block = self.facts.index.parent(line)
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            return None
        if not isinstance(block, cst.IndentedBlock):
            return None  # module level: the rest of the file is not the author's block
        body = list(block.body)
        at = body.index(line)
        rest = body[at + 1 :]
        if not rest:
            return None
        with_block = cst.With(
            items=[cst.WithItem(call)],
            body=cst.IndentedBlock(body=[rest[0].with_changes(leading_lines=()), *rest[1:]]),
            leading_lines=line.leading_lines,
        )
        return Replace(block, block.with_changes(body=[*body[:at], with_block]), unsafe=True)
