"""The benchmark's cases: their headers, read and checked.

A case is `bench/bugs/<CATEGORY>/bug_<slug>.py` or `ok_<slug>.py` whose first
four lines are `# source:`, `# category:`, `# expect:` and `# evidence:`
(see README.md beside this file).
"""

from __future__ import annotations

import collections
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, FrozenSet, List, Tuple

HERE = Path(__file__).resolve().parent
HEADER_KEYS = ("source", "category", "expect", "evidence")
CATEGORY = re.compile(r"^(DL\d{3}|new-[a-z0-9-]+)$")
EXPECT = re.compile(r"^(clean|flag\s+\d+(\s*,\s*\d+)*)$")

# The hazards the project is built around, each with the categories it spans.
HEADLINE = {
    ".data edits": ("DL101", "DL102", "DL103"),
    "accidental freezes": ("DL201",),
    "evaluation without no_grad": ("DL301",),
}


# What the benchmark aims at: enough cases to measure each rule on.
TARGET_CASES = 150
TARGET_PER_CATEGORY = (4, 3)  # bugs, look-alikes
TARGET_HEADLINE_BUGS = 20
TARGET_BUG_SHARE = (0.5, 0.7)


class HeaderError(ValueError):
    pass


@dataclass(frozen=True)
class Case:
    path: Path
    source: str  # where the report is
    category: str
    expected: FrozenSet[int]  # the lines a linter may rightly flag; empty for a look-alike
    evidence: str

    @property
    def is_bug(self) -> bool:
        return bool(self.expected)

    @property
    def name(self) -> str:
        return f"{self.path.parent.name}/{self.path.name}"


def read_case(path: Path) -> Case:
    lines = path.read_text(encoding="utf-8").splitlines()
    fields = {}
    for number, key in enumerate(HEADER_KEYS):
        line = lines[number] if number < len(lines) else ""
        match = re.match(rf"#\s*{key}:\s*(.+?)\s*$", line)
        if not match:
            raise HeaderError(f"{path}: line {number + 1} should be '# {key}: ...', not {line!r}")
        fields[key] = match.group(1)
    if not CATEGORY.match(fields["category"]):
        raise HeaderError(f"{path}: category {fields['category']!r} is neither a rule code nor new-<hazard>")
    if fields["category"] != path.parent.name:
        raise HeaderError(f"{path}: category {fields['category']} but the file is in {path.parent.name}/")
    if not EXPECT.match(fields["expect"]):
        raise HeaderError(f"{path}: expect should be 'clean' or 'flag <line>, <line>', not {fields['expect']!r}")
    expected = frozenset(int(n) for n in re.findall(r"\d+", fields["expect"]))
    kind = "bug" if expected else "ok"
    if not path.name.startswith(kind + "_"):
        raise HeaderError(f"{path}: a case that expects {fields['expect']!r} is named {kind}_<slug>.py")
    for number in sorted(expected):
        if not 4 < number <= len(lines) or not lines[number - 1].strip() or lines[number - 1].lstrip().startswith("#"):
            raise HeaderError(f"{path}: expected line {number} is not a line of code")
    return Case(path, fields["source"], fields["category"], expected, fields["evidence"])


def judged_true(root: Path = HERE) -> Dict[Tuple[str, int, str], str]:
    """(case, line, code) -> why: findings of other rules on a case's
    unlisted lines that were judged true by hand (`judged.txt`)."""
    path = root / "judged.txt"
    judged = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            match = re.match(r"^([^#\s]\S*):(\d+)\s+(DL\d{3})\s+(.+)$", line)
            if match:
                judged[(match.group(1), int(match.group(2)), match.group(3))] = match.group(4)
            elif line.strip() and not line.startswith("#"):
                raise HeaderError(f"{path}: {line!r} is not '<case>:<line> <code>  <why>'")
    return judged


def case_paths(root: Path = HERE) -> List[Path]:
    return sorted(p for p in root.glob("*/*.py") if p.name.startswith(("bug_", "ok_")))


def load_cases(root: Path = HERE) -> List[Case]:
    return [read_case(path) for path in case_paths(root)]


def batch_cases(name: str, root: Path = HERE) -> List[Case]:
    """The cases of one blind batch, listed in `batches/<name>.txt` (see BATCHES.md)."""
    listing = root / "batches" / f"{name}.txt"
    if not listing.exists():
        known = sorted(p.stem for p in (root / "batches").glob("*.txt"))
        raise ValueError(f"no batch {name!r} (known: {', '.join(known) or 'none'})")
    names = [line.strip() for line in listing.read_text(encoding="utf-8").splitlines() if line.strip() and not line.startswith("#")]
    return [read_case(root / name) for name in names]


def coverage_gaps(cases: List[Case], catalogue) -> List[str]:
    """Where the benchmark is short of its targets, one line each."""
    bugs = collections.Counter(c.category for c in cases if c.is_bug)
    alikes = collections.Counter(c.category for c in cases if not c.is_bug)
    gaps = []
    share = sum(bugs.values()) / len(cases) if cases else 0.0
    low, high = TARGET_BUG_SHARE
    if len(cases) < TARGET_CASES or not low <= share <= high:
        gaps.append(f"cases: {len(cases)}, {share:.0%} bugs (target {TARGET_CASES}, {low:.0%}-{high:.0%} bugs)")
    want_bugs, want_alikes = TARGET_PER_CATEGORY
    # The hazard catalogue; DL0xx are about detachlint itself (parse errors, idle suppressions).
    codes = sorted({c for c in set(catalogue) | {c.category for c in cases} if c.startswith("DL") and not c.startswith("DL0")})
    for code in codes:
        if bugs[code] < want_bugs or alikes[code] < want_alikes:
            gaps.append(f"{code}: {bugs[code]} bugs, {alikes[code]} look-alikes (target {want_bugs} and {want_alikes})")
    for hazard, members in HEADLINE.items():
        count = sum(bugs[code] for code in members)
        if count < TARGET_HEADLINE_BUGS:
            gaps.append(f"{hazard}: {count} bugs (target {TARGET_HEADLINE_BUGS})")
    return gaps
