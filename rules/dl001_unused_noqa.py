from __future__ import annotations

import re
from typing import Dict, List, Sequence

import libcst as cst

from detachlint.rule import Invalid, Replace, Rule


class _Comments(cst.CSTVisitor):
    """Every comment by its line, with the node that holds it."""

    def __init__(self, positions) -> None:
        self.positions = positions
        self.by_line: Dict[int, List[tuple]] = {}

    def _collect(self, holder: cst.CSTNode, comment) -> None:
        if comment is not None:
            self.by_line.setdefault(self.positions[comment].start.line, []).append((comment, holder))

    def visit_TrailingWhitespace(self, node: cst.TrailingWhitespace) -> None:
        self._collect(node, node.comment)

    def visit_EmptyLine(self, node: cst.EmptyLine) -> None:
        self._collect(node, node.comment)


class UnusedNoqa(Rule):
    """A suppression comment that silences nothing.

    ## What it does
    Flags `# noqa: DL...` and `# detachlint: ignore[...]` comments, or the
    codes in them, that silenced no finding in this run. Only codes of rules
    that ran are judged, and a bare `# noqa` is left alone (it may be for
    another tool). Off by default: enable it with `--extend-select DL001`.

    ## Why is this bad?
    A suppression outlives the code it was written for: after a refactor it
    silences nothing today and hides the next real finding on that line
    tomorrow. Listing only the codes that still apply keeps every
    suppression honest.

    ## Example
    ```python
    import torch

    def evaluate(model, loader):
        with torch.no_grad():
            return [model(x) for x in loader]  # noqa: DL301
    ```

    Use instead:
    ```python
    import torch

    def evaluate(model, loader):
        with torch.no_grad():
            return [model(x) for x in loader]
    ```

    ## Not flagged
    - A bare `# noqa`, and codes of other tools (`# noqa: E501`).
    - Codes of rules that did not run (not selected, or ignored for the file).
    - A suppression that silenced a finding of any rule it names.

    ## Fix safety
    Safe: the fix removes the idle codes from the comment, or the whole
    comment when nothing is left in it; it changes no code.

    ## Verification
    No probe: whether a comment silenced a finding is known from the run itself.

    ## References
    - flake8's `# noqa` convention, which detachlint's suppressions follow;
      ruff reports the same hazard for its own codes as RUF100.
    """

    code = "DL001"
    name = "unused-noqa"
    fix_title = "Remove the suppression that silences nothing"
    message = "{detail}"
    harm = "style"
    default_enabled = False
    judges_suppressions = True  # the engine calls `check_suppressions` after every other rule

    valid = [
        """
        import torch

        def evaluate(model, loader):
            model.eval()
            outs = []
            for x in loader:
                outs.append(model(x).argmax(1))  # noqa: DL301
            return outs
        """,
        # A prefix that silenced one of its family.
        """
        import torch

        def evaluate(model, loader):
            model.eval()
            total = 0
            for x in loader:
                total += model(x).sum().item()  # detachlint: ignore[DL3]
            return total
        """,
        # Another tool's code, and a bare noqa.
        """
        import torch

        x = torch.ones(3)  # noqa: E501
        y = torch.ones(3)  # noqa
        """,
    ]

    invalid = [
        Invalid(
            """
            import torch

            def evaluate(model, loader):
                with torch.no_grad():
                    return [model(x) for x in loader]  # noqa: DL301
            """,
            line=5,
            message="`# noqa: DL301` silences nothing here",
            fixed="""
            import torch

            def evaluate(model, loader):
                with torch.no_grad():
                    return [model(x) for x in loader]
            """,
        ),
        Invalid(
            """
            import torch

            def evaluate(model, loader):
                model.eval()
                outs = []
                for x in loader:
                    outs.append(model(x).argmax(1))  # noqa: E501, DL301, DL101
                return outs
            """,
            line=7,
            message="DL101 in `# noqa: E501, DL301, DL101` silences nothing here",
            fixed="""
            import torch

            def evaluate(model, loader):
                model.eval()
                outs = []
                for x in loader:
                    outs.append(model(x).argmax(1))  # noqa: E501, DL301
                return outs
            """,
        ),
    ]

    invalid.append(
        # A detachlint ignore on a line of its own, over a line it no longer matches.
        Invalid(
            """
            import torch

            def evaluate(model, loader):
                # detachlint: ignore[DL301]
                with torch.no_grad():
                    return [model(x) for x in loader]
            """,
            line=4,
            message="`# detachlint: ignore[DL301]` silences nothing here",
            fixed="""
            import torch

            def evaluate(model, loader):
                with torch.no_grad():
                    return [model(x) for x in loader]
            """,
        )
    )

    def check_suppressions(self, suppressions, enabled: Sequence[str]) -> None:
        """Report the comments of `suppressions` (the engine's) that silenced nothing."""
        idle = suppressions.unused(enabled)
        if not idle:
            return
        comments = _Comments(self.facts.positions)
        self.facts.module.visit(comments)
        for suppression, codes in idle:
            held = next(
                ((c, h) for c, h in comments.by_line.get(suppression.line, []) if suppression.text in c.value), None
            )
            if held is None:
                continue
            comment, holder = held
            if codes:
                listed = ", ".join(codes)
                if len(codes) == len(suppression.codes):
                    detail = f"`{suppression.text}` silences nothing here: no {listed} finding on this line"
                else:
                    detail = f"{listed} in `{suppression.text}` silences nothing here: no such finding on this line"
            else:
                detail = f"`{suppression.text}` silences nothing here: no finding on this line"
            self.report(comment, fix=_fix(comment, holder, suppression.text, codes, suppression.codes), detail=detail)


def _fix(comment: cst.Comment, holder: cst.CSTNode, text: str, idle: List[str], given) -> Replace:
    kept = [] if given is None else [c for c in _ordered(text) if c not in idle]
    if kept:
        keyword = "noqa: " if text.lower().lstrip("# ").startswith("noqa") else None
        new = ("# noqa: " + ", ".join(kept)) if keyword else f"# detachlint: ignore[{', '.join(kept)}]"
        return Replace(comment, cst.Comment(comment.value.replace(text, new)))
    rest = comment.value.replace(text, "").strip()
    if rest and rest != "#":
        return Replace(comment, cst.Comment(rest if rest.startswith("#") else "# " + rest))
    if isinstance(holder, cst.TrailingWhitespace):
        return Replace(holder, holder.with_changes(whitespace=cst.SimpleWhitespace(""), comment=None))
    return Replace(holder, cst.RemovalSentinel.REMOVE)


def _ordered(text: str) -> List[str]:
    """The codes of a suppression comment, in the order written."""
    inside = re.split(r"noqa:|ignore\[", text, flags=re.I)[-1].rstrip("]")
    return [c.upper() for c in re.split(r"[\s,]+", inside) if c]
