"""What a rule is: metadata, docs, examples and a matcher over shared facts."""

from __future__ import annotations

import inspect
import textwrap
from dataclasses import dataclass
from typing import Callable, ClassVar, Dict, List, Optional, Sequence, Tuple, Type, Union

import libcst as cst

from detachlint.analysis import Facts


@dataclass(frozen=True)
class Valid:
    source: str


@dataclass(frozen=True)
class Invalid:
    source: str
    line: Optional[int] = None
    column: Optional[int] = None
    message: Optional[str] = None  # a fragment the message must contain
    fixed: Optional[str] = None
    verdict: Optional[str] = None


Example = Union[str, Valid, Invalid]


@dataclass(frozen=True)
class Replace:
    """A fix: put `new` where `old` is in the tree.

    `unsafe` fixes change behaviour (that may be the point) and run only
    under `--unsafe-fixes`. `imports` names modules the new code needs
    (`("torch",)`); an `import torch` is added when the file lacks one.
    `drop_unused` names imported objects (`("torch.autograd.Variable",)`)
    whose `from ... import` goes when the fix leaves the file no use of them.
    """

    old: cst.CSTNode
    new: cst.CSTNode
    unsafe: bool = False
    imports: Tuple[str, ...] = ()
    drop_unused: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Report:
    """A rule's raw finding: a node and its message, positions come later."""

    code: str
    node: cst.CSTNode
    message: str
    fix: Optional[Replace] = None
    details: Optional[dict] = None  # plain data for reports that draw (the HTML report)
    harm: Optional[str] = None  # this finding's, when less than its rule's (`HARMS`)


def brief(code: str, limit: int = 60) -> str:
    """Code as a message quotes it: whole when short and on one line, else the callee and `(...)`."""
    return code if len(code) <= limit and "\n" not in code else code.split("(", 1)[0] + "(...)"


# What a true finding does to a run, and the severity that follows from it.
HARMS = {
    "raises": "error",  # the code raises at run time
    "wrong-gradients": "error",  # training silently computes something else
    "waste": "warning",  # memory or compute spent for nothing
    "style": "info",  # dated or idle code that changes nothing
}
SEVERITIES = ("error", "warning", "info")


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    fix_title: ClassVar[Optional[str]] = None
    # The harm of a true finding (`HARMS`); a finding may name a lesser one
    # (`report(..., harm=...)`). It decides the severity, which the user's
    # config may override per rule.
    harm: ClassVar[str] = "wrong-gradients"
    severity: ClassVar[str] = "error"
    default_enabled: ClassVar[bool] = True
    valid: ClassVar[Sequence[Example]] = ()
    invalid: ClassVar[Sequence[Example]] = ()

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        # A rule that names its harm gets that harm's severity; one of a
        # user's rule-paths may still set `severity` alone.
        if "harm" in cls.__dict__ or "severity" not in cls.__dict__:
            cls.severity = HARMS[cls.harm]

    def __init__(self, facts: Facts) -> None:
        self.facts = facts
        self.reports: List[Report] = []

    def report(
        self,
        node: cst.CSTNode,
        fix: Optional[Replace] = None,
        details: Optional[dict] = None,
        template: Optional[str] = None,
        harm: Optional[str] = None,
        **fields: str,
    ) -> None:
        self.reports.append(Report(self.code, node, (template or self.message).format(**fields), fix, details, harm))

    def finish(self) -> None:
        """Called after every node was dispatched; for whole-file queries."""

    # Class-level helpers ---------------------------------------------------

    @classmethod
    def docs(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def summary(cls) -> str:
        return cls.docs().splitlines()[0] if cls.__doc__ else ""

    @classmethod
    def handlers(cls) -> List[Tuple[Type[cst.CSTNode], str]]:
        """(node type, method name) for each `visit_<NodeType>` the rule has."""
        found = []
        for attribute in dir(cls):
            if attribute.startswith("visit_"):
                node_type = getattr(cst, attribute[len("visit_"):], None)
                if isinstance(node_type, type) and issubclass(node_type, cst.CSTNode):
                    found.append((node_type, attribute))
        return found

    @classmethod
    def examples(cls, kind: str) -> List[Union[Valid, Invalid]]:
        wrap = Valid if kind == "valid" else Invalid
        out = []
        for example in getattr(cls, kind):
            if isinstance(example, str):
                example = wrap(example)
            source = textwrap.dedent(example.source).strip("\n") + "\n"
            out.append(type(example)(**{**example.__dict__, "source": source}))
        return out
