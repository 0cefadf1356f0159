"""The records that flow from the engine to the reporters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class Edit:
    """Replace the text between two 1-based (line, column) positions."""

    line: int
    column: int
    end_line: int
    end_column: int
    content: str


@dataclass(frozen=True)
class Fix:
    title: str
    applicability: str  # "safe" or "unsafe"
    edits: tuple = ()

    def to_json(self) -> dict:
        return {
            "title": self.title,
            "applicability": self.applicability,
            "edits": [e.__dict__ for e in self.edits],
        }


@dataclass(frozen=True)
class Verification:
    # confirmed or refuted (on the user's own code), plausible (the hazard
    # shown on a stand-in or on synthetic tensors), or inconclusive.
    status: str
    evidence: str
    # What the run measured, as plain data (parameters and their gradients,
    # bytes kept per step), for reports that draw it.
    details: Optional[dict] = field(default=None, compare=False)
    # What the verdict rests on: "user-code" or "stand-in".
    basis: Optional[str] = None
    # The containment the reproduction ran in (verify/sandbox.py).
    sandbox: Optional[str] = field(default=None, compare=False)

    def to_json(self) -> dict:
        data = {"status": self.status, "evidence": self.evidence}
        if self.basis is not None:
            data["basis"] = self.basis
        if self.sandbox is not None:
            data["sandbox"] = self.sandbox
        if self.details is not None:
            data["details"] = self.details
        return data


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    column: int
    code: str
    name: str = field(compare=False)
    end_line: int = field(compare=False)
    end_column: int = field(compare=False)
    message: str = field(compare=False)
    severity: str = field(default="error", compare=False)
    fix: Optional[Fix] = field(default=None, compare=False)
    verification: Optional[Verification] = field(default=None, compare=False)
    # In a notebook: the cell (1-based, every cell counted); line and columns
    # are then the cell's own.
    cell: Optional[int] = None
    # What the static analysis knows beyond the message, as plain data (the
    # model's members for a freeze), for reports that draw it.
    details: Optional[dict] = field(default=None, compare=False)

    def _order(self) -> tuple:
        # The report order: path, then position (cell first), then code.
        return (self.path, self.cell or 0, self.line, self.column, self.code)

    def __lt__(self, other: "Finding") -> bool:
        return self._order() < other._order()

    @property
    def location(self) -> str:
        """`path:line:col`, or `path:cell N:line:col` in a notebook."""
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{self.path}:{cell}{self.line}:{self.column}"

    def to_json(self) -> dict:
        return {
            "code": self.code,
            "name": self.name,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "message": self.message,
            "severity": self.severity,
            "fix": self.fix.to_json() if self.fix else None,
            "verification": self.verification.to_json() if self.verification else None,
            "cell": self.cell,
            **({"details": self.details} if self.details is not None else {}),
        }

    @classmethod
    def from_json(cls, data: dict) -> "Finding":
        """The finding `to_json` wrote (a cached result, a saved JSON report)."""
        fix = data.get("fix")
        verification = data.get("verification")
        return cls(
            path=data["path"],
            line=data["line"],
            column=data["column"],
            code=data["code"],
            name=data["name"],
            end_line=data["end_line"],
            end_column=data["end_column"],
            message=data["message"],
            severity=data["severity"],
            fix=Fix(fix["title"], fix["applicability"], tuple(Edit(**e) for e in fix["edits"])) if fix else None,
            verification=Verification(**verification) if verification else None,
            cell=data.get("cell"),
            details=data.get("details"),
        )
