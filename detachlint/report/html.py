"""One self-contained HTML page: findings by file and rule, each with its
code, message, fix and verdict, and pictures of what was found or measured.

Nothing is fetched when the page is viewed: styles are inline and the
pictures are inline SVG. A freeze (DL201) draws the model's module tree
with the parts that get no gradient marked: from the static analysis
(the members the file builds) and, after `--verify`, from the parameters
the run saw. An evaluation loop (DL301) or an accumulation (DL401) that
`--verify` measured draws what stayed alive at each step.
"""

from __future__ import annotations

import difflib
import html
from collections import Counter, defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from detachlint import __version__
from detachlint.finding import Edit, Finding
from detachlint.notebook import NotebookError, Program, is_notebook

_EXCERPT_CONTEXT = 3
_TREE_DEPTH = 4  # deeper parameters are counted in their ancestor at this depth
_TREE_ROWS = 80

_STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1f2328; background: #f6f8fa; }
header { background: #24292f; color: #fff; padding: 16px 32px; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header p { margin: 0; color: #d0d7de; }
main { padding: 16px 32px 48px; max-width: 1100px; }
nav table { border-collapse: collapse; background: #fff; margin: 12px 0 24px; }
nav td, nav th { border: 1px solid #d0d7de; padding: 4px 10px; text-align: left; }
section.file { background: #fff; border: 1px solid #d0d7de; border-radius: 6px; margin: 0 0 24px; padding: 8px 20px 16px; }
section.file > h2 { font-size: 17px; font-family: ui-monospace, monospace; margin: 8px 0; }
section.rule > h3 { font-size: 15px; margin: 16px 0 8px; }
article.finding { border-left: 4px solid #cf222e; padding: 4px 0 8px 14px; margin: 0 0 18px; }
article.finding.warning { border-color: #bf8700; }
article.finding.info { border-color: #57606a; }
.where { font-family: ui-monospace, monospace; color: #57606a; }
.message { margin: 4px 0 8px; }
pre { background: #f6f8fa; border: 1px solid #d0d7de; border-radius: 6px; padding: 8px; overflow-x: auto; font-size: 12.5px; margin: 6px 0; }
pre .hit { background: #ffebe9; display: block; }
pre .no { color: #8c959f; user-select: none; }
pre.diff .add { color: #116329; background: #dafbe1; display: block; }
pre.diff .del { color: #82071e; background: #ffebe9; display: block; }
.verdict { padding: 4px 8px; border-radius: 4px; display: inline-block; margin: 4px 0; }
.verdict.confirmed { background: #ffebe9; color: #82071e; }
.verdict.plausible { background: #fff8c5; color: #7d4e00; }
.verdict.refuted { background: #dafbe1; color: #116329; }
.verdict.inconclusive { background: #eaeef2; color: #424a53; }
figure { margin: 8px 0; }
figcaption { color: #57606a; font-size: 12.5px; }
svg text { font: 12px ui-monospace, monospace; }
"""

_COLOURS = {"none": "#cf222e", "some": "#bf8700", "all": "#1a7f37", "frozen": "#8c959f"}


def render_html(findings: Sequence[Finding], context) -> str:
    by_file: Dict[str, List[Finding]] = defaultdict(list)
    for finding in findings:
        by_file[finding.path].append(finding)
    counts = Counter((f.code, f.name) for f in findings)
    files = len(set(context.files) | set(by_file))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>detachlint: {len(findings)} finding{'s' if len(findings) != 1 else ''}</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<header><h1>detachlint report</h1>",
        f"<p>{len(findings)} finding{'s' if len(findings) != 1 else ''} in {files} file{'s' if files != 1 else ''}"
        f" &middot; detachlint {html.escape(__version__)}</p></header><main>",
    ]
    if counts:
        rows = "".join(
            f"<tr><td>{html.escape(code)}</td><td>{html.escape(name)}</td><td>{n}</td></tr>"
            for (code, name), n in sorted(counts.items())
        )
        parts.append(f'<nav><table id="summary"><tr><th>rule</th><th>name</th><th>findings</th></tr>{rows}</table></nav>')
    else:
        parts.append('<p id="summary">No findings.</p>')
    for error in context.errors:
        parts.append(f'<p class="error">{html.escape(error)}</p>')
    number = 0
    for path in sorted(by_file):
        source = _Source(path)
        parts.append(f'<section class="file"><h2>{html.escape(path)}</h2>')
        by_rule: Dict[Tuple[str, str], List[Finding]] = defaultdict(list)
        for finding in sorted(by_file[path]):
            by_rule[(finding.code, finding.name)].append(finding)
        for (code, name), group in sorted(by_rule.items()):
            parts.append(f'<section class="rule"><h3>{html.escape(code)} {html.escape(name)} ({len(group)})</h3>')
            for finding in group:
                number += 1
                parts.append(_finding(finding, number, source, context))
            parts.append("</section>")
        parts.append("</section>")
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


class _Source:
    """A finding's file, as lines, per cell for a notebook."""

    def __init__(self, path: str) -> None:
        self.lines: Optional[List[str]] = None
        self.cells: Dict[int, List[str]] = {}
        try:
            data = Path(path).read_bytes()
        except OSError:
            return
        if is_notebook(path):
            try:
                program = Program.from_bytes(data)
            except NotebookError:
                return
            if program is not None:
                # The cells as written: magics, indentation and cells that do not parse included.
                for span in program.spans:
                    self.cells[span.cell] = program.cell_lines(span.cell)
            return
        self.lines = data.decode("utf-8", "replace").splitlines()

    def of(self, finding: Finding) -> Optional[List[str]]:
        return self.cells.get(finding.cell) if finding.cell is not None else self.lines


def _finding(finding: Finding, number: int, source: _Source, context) -> str:
    lines = source.of(finding)
    level = finding.severity if finding.severity in ("warning", "info") else "error"
    out = [
        f'<article class="finding {level}" id="finding-{number}" data-code="{html.escape(finding.code)}">',
        f'<div class="where">{html.escape(finding.location)}</div>',
        f'<p class="message">{html.escape(finding.message)}</p>',
    ]
    if lines:
        out.append(_excerpt(lines, finding.line, finding.end_line))
    if finding.fix is not None and lines:
        diff = _fix_diff(lines, finding.fix.edits)
        if diff:
            applies = "applied by --fix" if finding.fix.applicability == "safe" else "unsafe: applied by --fix --unsafe-fixes"
            out.append(
                f'<details class="fix" open><summary>Fix: {html.escape(finding.fix.title)} ({applies})</summary>{diff}</details>'
            )
    verification = finding.verification
    if verification is not None:
        out.append(
            f'<p class="verdict {html.escape(verification.status)}"><b>{html.escape(verification.status)}</b>: '
            f"{html.escape(verification.evidence)}</p>"
        )
    if finding.details and finding.details.get("members"):
        out.append(_static_tree(finding.details))
    measured = verification.details if verification is not None and verification.details else {}
    if measured.get("parameters"):
        out.append(_measured_tree(measured["parameters"], (finding.details or {}).get("model", "model")))
    if measured.get("steps"):
        values = [step.get("live_bytes", 0) for step in measured["steps"]]
        out.append(_chart(values, "bytes of saved activations alive after each evaluation step (measured)", "step", _bytes))
    if measured.get("graph_nodes"):
        name = measured.get("accumulator", "the accumulator")
        out.append(_chart(measured["graph_nodes"], f"autograd nodes reachable from `{name}` after each iteration (measured)", "iteration", str))
    out.append("</article>")
    return "\n".join(out)


def _excerpt(lines: List[str], line: int, end_line: int) -> str:
    first = max(1, line - _EXCERPT_CONTEXT)
    last = min(len(lines), max(line, end_line) + _EXCERPT_CONTEXT)
    width = len(str(last))
    rows = []
    for number in range(first, last + 1):
        text = html.escape(lines[number - 1])
        row = f'<span class="no">{number:>{width}} </span>{text}'
        rows.append(f'<span class="hit">{row}</span>' if line <= number <= max(line, end_line) else row + "\n")
    return '<pre class="excerpt">' + "".join(rows) + "</pre>"


def _apply(lines: List[str], edits: Sequence[Edit]) -> Optional[str]:
    text = "\n".join(lines)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)

    def offset(line: int, column: int) -> Optional[int]:
        if not 1 <= line <= len(lines):
            return None
        return starts[line - 1] + column - 1

    for edit in sorted(edits, key=lambda e: (e.line, e.column), reverse=True):
        start, end = offset(edit.line, edit.column), offset(edit.end_line, edit.end_column)
        if start is None or end is None:
            return None
        text = text[:start] + edit.content + text[end:]
    return text


def _fix_diff(lines: List[str], edits: Sequence[Edit]) -> str:
    fixed = _apply(lines, edits)
    if fixed is None:
        return ""
    rows = []
    for row in list(difflib.unified_diff(lines, fixed.split("\n"), lineterm="", n=2))[2:]:
        kind = "add" if row.startswith("+") else "del" if row.startswith("-") else "ctx"
        text = html.escape(row)
        rows.append(f'<span class="{kind}">{text}</span>' if kind != "ctx" else text + "\n")
    return '<pre class="diff">' + "".join(rows) + "</pre>"


# Pictures ---------------------------------------------------------------


def _tree_svg(rows: List[Tuple[int, str, str, str]], label: str, kind: str) -> str:
    """An indented tree: rows of (depth, name, note, state); a dot's colour
    says whether the part gets gradients."""
    height = 22 * len(rows) + 34
    shapes = []
    last_at_depth: Dict[int, int] = {}
    for row, (depth, name, note, state) in enumerate(rows):
        x, y = 16 + depth * 22, 20 + row * 22
        if depth > 0 and depth - 1 in last_at_depth:
            parent_y = 20 + last_at_depth[depth - 1] * 22
            px = 16 + (depth - 1) * 22
            shapes.append(f'<path d="M{px} {parent_y + 6} V{y} H{x - 7}" fill="none" stroke="#afb8c1"/>')
        last_at_depth[depth] = row
        for deeper in [d for d in last_at_depth if d > depth]:
            del last_at_depth[deeper]
        colour = _COLOURS[state]
        shapes.append(f'<circle cx="{x}" cy="{y}" r="5" fill="{colour}" data-state="{state}"/>')
        shapes.append(
            f'<text x="{x + 10}" y="{y + 4}"><tspan>{html.escape(name)}</tspan>'
            f'<tspan fill="#57606a"> {html.escape(note)}</tspan></text>'
        )
    legend_y = height - 10
    legend = "".join(
        f'<circle cx="{16 + i * 150}" cy="{legend_y - 4}" r="5" fill="{_COLOURS[s]}"/>'
        f'<text x="{26 + i * 150}" y="{legend_y}">{text}</text>'
        for i, (s, text) in enumerate([("none", "no gradient"), ("some", "partly"), ("all", "gets gradients"), ("frozen", "not trainable")])
    )
    width = max(620, max((16 + d * 22 + 12 + 7.5 * (len(n) + len(t) + 1) for d, n, t, _ in rows), default=0))
    return (
        f'<figure class="model-tree {kind}"><svg xmlns="http://www.w3.org/2000/svg" width="{int(width)}" height="{height}" '
        f'role="img" aria-label="{html.escape(label)}">{"".join(shapes)}{legend}</svg>'
        f"<figcaption>{html.escape(label)}</figcaption></figure>"
    )


def _static_tree(details: dict) -> str:
    rows = [(0, details.get("model", "model"), "", "some")]
    for member in details["members"]:
        if member.get("cut_off"):
            state, note = "none", "cut off: no gradient"
        elif member.get("trainable"):
            state, note = "all", ""
        else:
            state, note = "frozen", "no trainable parameters" if member.get("kind") == "module" else "frozen"
        rows.append((1, member["name"], f"= {member.get('built_by', '')} {note}".rstrip(), state))
    states = {state for _, _, _, state in rows[1:] if state != "frozen"}
    rows[0] = (0, rows[0][1], "", "none" if states == {"none"} else "all" if states == {"all"} else "some")
    return _tree_svg(rows, f"the members of `{details.get('model', 'model')}` (static analysis)", "static")


def _measured_tree(parameters: List[dict], model: str) -> str:
    # Counts of (no gradient, gradient, frozen) parameters under each module path.
    counts: Dict[Tuple[str, ...], List[int]] = defaultdict(lambda: [0, 0, 0])
    order: List[Tuple[str, ...]] = []
    for parameter in parameters:
        parts = tuple(parameter["name"].split("."))[:-1][:_TREE_DEPTH]
        slot = 2 if not parameter.get("requires_grad") else 1 if parameter.get("got_grad") else 0
        for depth in range(len(parts) + 1):
            path = parts[:depth]
            if path not in counts:
                order.append(path)
            counts[path][slot] += 1
    rows = []
    for path in order[:_TREE_ROWS]:
        none, some, frozen = counts[path]
        if none and not some:
            state = "none"
        elif some and not none:
            state = "all"
        elif none and some:
            state = "some"
        else:
            state = "frozen"
        total = none + some + frozen
        note = f"{none} of {total} parameters without gradient" if none else f"{total} parameters"
        rows.append((len(path), path[-1] if path else model, note, state))
    return _tree_svg(rows, f"parameters of `{model}` after one forward and backward (measured by --verify)", "measured")


def _chart(values: Sequence[int], label: str, unit: str, fmt) -> str:
    width, height, left, bottom = 520, 200, 90, 34
    top = max(values) or 1
    bar = (width - left - 20) / max(len(values), 1)
    shapes = [
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}" stroke="#57606a"/>',
        f'<line x1="{left}" y1="12" x2="{left}" y2="{height - bottom}" stroke="#57606a"/>',
        f'<text x="{left - 6}" y="18" text-anchor="end">{html.escape(fmt(top))}</text>',
        f'<text x="{left - 6}" y="{height - bottom}" text-anchor="end">0</text>',
    ]
    for i, value in enumerate(values):
        h = (height - bottom - 14) * value / top
        x = left + 6 + i * bar
        shapes.append(
            f'<rect class="bar" x="{x:.1f}" y="{height - bottom - h:.1f}" width="{bar - 12:.1f}" height="{h:.1f}" fill="#cf222e">'
            f"<title>{unit} {i + 1}: {html.escape(fmt(value))}</title></rect>"
        )
        shapes.append(f'<text x="{x + (bar - 12) / 2:.1f}" y="{height - bottom + 16}" text-anchor="middle">{unit} {i + 1}</text>')
    return (
        f'<figure class="chart"><svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="{html.escape(label)}">{"".join(shapes)}</svg><figcaption>{html.escape(label)}</figcaption></figure>'
    )


def _bytes(count: int) -> str:
    value = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return str(count)
