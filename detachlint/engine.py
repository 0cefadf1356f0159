"""Parse once, build the shared facts once, run every enabled rule.

The one public function, `lint_source`, returns findings and never prints;
the CLI, the language server and the tests all call it.
"""

from __future__ import annotations

import ast
import dataclasses
import gc
import io
import tokenize
from contextlib import contextmanager
from dataclasses import dataclass, field
import time
from typing import Dict, List, Optional, Sequence, Tuple, Type

import libcst as cst

from detachlint.analysis import Facts
from detachlint.analysis.project import Context, Summary, summarize
from detachlint.finding import Finding
from detachlint.fixing import FixDescriber
from detachlint.rule import HARMS, Report, Rule
from detachlint.sections import SECTION_BYTES, sections
from detachlint.suppression import Suppressions, skips_file

PARSE_ERROR_CODE = "DL000"
PARSE_ERROR_NAME = "parse-error"


@dataclass
class FileResult:
    findings: List[Finding] = field(default_factory=list)
    # Internal errors (a rule that raised): reported, never fatal to the run.
    errors: List[str] = field(default_factory=list)
    # Why the file was not analysed (over its time budget): a warning.
    skipped: Optional[str] = None
    # What the file tells the run's other files (linted with a `Context`).
    summary: Optional[Summary] = None


class OverBudget(Exception):
    """The file's analysis ran past its deadline."""


def might_need_linting(source: bytes) -> bool:
    """Cheap byte-level test: no rule can fire in a file that never says torch."""
    return b"torch" in source


def parse_error(path: str, line: int, column: int, message: str) -> Finding:
    return Finding(
        path=path,
        line=line,
        column=column,
        code=PARSE_ERROR_CODE,
        name=PARSE_ERROR_NAME,
        end_line=line,
        end_column=column,
        message=message,
    )


def parse(source: bytes, path: str) -> Tuple[cst.Module, None] | Tuple[None, Finding]:
    if b"\x00" in source:
        return None, parse_error(path, 1, 1, "file is binary (it contains NUL bytes), not Python source")
    # Python's own parser reads the file first (a tenth of libcst's time). Its
    # depth limits stop machine-made nesting (thousands of brackets or chained
    # operators) that would overflow the C stack of libcst's native parser,
    # and its message and position for a syntax error are the better ones.
    python_error = _python_syntax_error(source)
    if python_error is TOO_DEEP:
        return None, parse_error(path, 1, 1, f"cannot parse: {TOO_DEEP}")
    if isinstance(python_error, SyntaxError) and not _shallow(source):
        # Python stopped at an early error, before its depth limits could
        # look at the rest; libcst would recurse into it without a guard.
        line, column = python_error.lineno or 1, max(python_error.offset or 1, 1)
        return None, parse_error(path, line, column, f"cannot parse: {python_error.msg}")
    try:
        return cst.parse_module(source), None
    except cst.ParserSyntaxError as error:
        line, column = error.raw_line, error.raw_column + 1
        message = str(error.message).strip().splitlines()[0] if error.message else "invalid syntax"
        if isinstance(python_error, SyntaxError) and python_error.lineno:
            line, column = python_error.lineno, max(python_error.offset or 1, 1)
            message = python_error.msg
        return None, parse_error(path, line, column, f"cannot parse: {message}")
    except (UnicodeDecodeError, LookupError) as error:
        return None, parse_error(path, 1, 1, f"cannot decode the file: {error}")
    except SyntaxError as error:  # raised for an unknown coding cookie
        return None, parse_error(path, error.lineno or 1, 1, f"cannot decode the file: {error.msg}")
    except Exception as error:  # libcst raises a few other types on odd input
        text = str(error).strip().splitlines()
        return None, parse_error(path, 1, 1, f"cannot parse: {text[0] if text else type(error).__name__}")


TOO_DEEP = "the code nests too deeply to analyse"
# Well inside what libcst's native parser recurses through on an 8 MiB stack
# (about 2,000 brackets or 8,000 chained operators).
_MAX_BRACKETS = 100
_MAX_OPERATORS_PER_STATEMENT = 1000
_CHAINING_WORDS = {"and", "or", "not", "in", "is", "if", "else", "lambda", "await"}


def _shallow(source: bytes) -> bool:
    """For a file Python rejects: whether its bracket depth and the operators
    in each statement stay far from what overflows libcst's parser. Python's
    tokenizer measures it (pure Python, no C recursion); a file it cannot
    tokenize to the end is not called shallow, unless it cannot be decoded
    at all (libcst stops at decoding too, before any recursion)."""
    depth = operators = 0
    try:
        tokenize.detect_encoding(io.BytesIO(source).readline)
    except (SyntaxError, LookupError):
        return True
    try:
        for token in tokenize.tokenize(io.BytesIO(source).readline):
            kind, text = token.type, token.string
            if kind == tokenize.OP and text in "([{":
                depth += 1
                if depth > _MAX_BRACKETS:
                    return False
            elif kind == tokenize.OP and text in ")]}":
                depth = max(depth - 1, 0)
            elif (kind == tokenize.OP and text not in ",;") or (kind == tokenize.NAME and text in _CHAINING_WORDS):
                operators += 1
                if operators > _MAX_OPERATORS_PER_STATEMENT:
                    return False
            elif kind == tokenize.NEWLINE:
                operators = 0
    except (UnicodeDecodeError, LookupError):
        return True
    except (tokenize.TokenError, SyntaxError, ValueError):
        return False
    return True


def _python_syntax_error(source: bytes):
    """None when Python parses `source`; TOO_DEEP past its nesting limits; else the SyntaxError."""
    try:
        ast.parse(source)
    except (RecursionError, MemoryError):
        return TOO_DEEP
    except SyntaxError as error:
        if error.msg in ("too many nested parentheses", "too many nested blocks"):
            return TOO_DEEP
        return error
    except ValueError:  # e.g. NUL bytes after decoding: libcst words it
        return None
    return None


@dataclass
class Checked:
    """One parsed file after every rule ran: the raw material of findings and fixes."""

    module: cst.Module
    facts: Facts
    reports: List[Tuple[Report, int, int]]  # unsuppressed reports with (line, column)
    errors: List[str]


def check_module(
    module: cst.Module,
    source: bytes,
    path: str,
    rules: Sequence[Type[Rule]],
    deadline: Optional[float] = None,
    project: Optional[Context] = None,
    first_line: int = 1,
) -> Checked:
    """Every rule's reports on `module`, parsed from `source`, which starts
    on the file's line `first_line` (past 1 for a section of a long file)."""
    # Decoding the bytes is far cheaper than regenerating `module.code`.
    suppressions = Suppressions(source.decode(module.encoding, errors="replace"), first_line)
    facts = Facts(module, path, source, project=project, first_line=first_line)
    checked = Checked(module, facts, [], [])
    if suppressions.skip_file or not rules:
        return checked
    reports: List[Report] = []
    for rule_class in rules:
        if deadline is not None and time.monotonic() > deadline:
            raise OverBudget()
        rule = rule_class(facts)
        try:
            for node_type, method in _handlers(rule_class):
                handler = getattr(rule, method)
                for node in facts.index.nodes(node_type):
                    handler(node)
            rule.finish()
        except RecursionError:
            raise  # the file, not the rule: see lint_source
        except Exception as error:  # one faulty rule must not end the run
            checked.errors.append(f"{path}: internal error in {rule_class.code}: {type(error).__name__}: {error}")
            continue
        reports.extend(rule.reports)
    judges = [rule_class for rule_class in rules if getattr(rule_class, "judges_suppressions", False)]
    if not reports and not (judges and suppressions.comments):
        return checked
    positions = facts.positions
    seen = set()
    for report in reports:
        where = positions[report.node]
        line, column = where.start.line, where.start.column + 1
        if suppressions.suppresses(line, report.code) or (report.code, line, column) in seen:
            continue
        seen.add((report.code, line, column))
        checked.reports.append((report, line, column))
    # Rules about suppressions run last: they judge what the others left.
    for rule_class in judges:
        rule = rule_class(facts)
        try:
            rule.check_suppressions(suppressions, [r.code for r in rules])
        except Exception as error:  # one faulty rule must not end the run
            checked.errors.append(f"{path}: internal error in {rule_class.code}: {type(error).__name__}: {error}")
            continue
        for report in rule.reports:
            where = positions[report.node]
            checked.reports.append((report, where.start.line, where.start.column + 1))
    checked.reports.sort(key=lambda item: (item[1], item[2], item[0].code))
    return checked


_HANDLERS: Dict[Type[Rule], List[Tuple[type, str]]] = {}


def _handlers(rule_class: Type[Rule]) -> List[Tuple[type, str]]:
    # Looked up once per rule class, not once per file (it reads dir()).
    found = _HANDLERS.get(rule_class)
    if found is None:
        found = _HANDLERS[rule_class] = rule_class.handlers()
    return found


def lint_source(
    source: bytes,
    path: str,
    rules: Sequence[Type[Rule]],
    prefilter: bool = True,
    seconds: Optional[float] = None,
    project: Optional[Context] = None,
) -> FileResult:
    """Findings of `rules` on one file's bytes; `path` is only echoed back.
    `prefilter=False` parses and analyses even files that never say torch.
    `seconds` is the file's time budget: past it, the analysis stops between
    rules and the result says why the file was skipped. With `project`, the
    file is analysed knowing the calls other files make of its functions,
    and the result carries its own `Summary` for them."""
    started = time.monotonic()
    deadline = None if seconds is None else started + seconds
    result = FileResult()
    if prefilter and not might_need_linting(source) and b"\x00" not in source and not (project and project.elsewhere):
        # Files that never say torch are not ours to judge: they cost nothing,
        # unless another file calls them with autograd off (a link of a chain).
        return result
    with _collector_paused():
        try:
            text = _long_text(source)
            if text is not None:
                return _in_sections(text, path, rules, deadline, project)
            module, error = parse(source, path)
            if error is not None:
                result.findings.append(error)
                return result
            assert module is not None
            return _findings(module, source, path, rules, deadline, project)
        except OverBudget:
            spent = time.monotonic() - started
            result.skipped = f"{path}: skipped: analysis passed its {seconds:g} s budget ({spent:.1f} s); raise max-file-seconds to lint it"
            return result
        except RecursionError:
            # Machine-made code can nest deeper than any analysis can recurse.
            result.findings.append(parse_error(path, 1, 1, f"cannot analyse: {TOO_DEEP}"))
            return result


@contextmanager
def _collector_paused():
    """A file's syntax tree and facts are a few hundred thousand objects that
    live until the file is done: Python's cycle collector would scan them
    over and over while the rules run. It waits until the file is done
    instead; the file's own reference cycles are freed then."""
    if not gc.isenabled():  # paused by the caller, or by another thread's file
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _one_line(message: str) -> str:
    """A message quoting multi-line code stays one line: every output format
    (concise, GitHub annotations, editors) reads a finding per line."""
    return " ".join(message.split()) if "\n" in message else message


def _long_text(source: bytes) -> Optional[str]:
    """A file's text when it is long enough to analyse in sections
    (`sections.py`): UTF-8 (as nearly all code is), without NUL bytes."""
    if len(source) <= SECTION_BYTES or b"\x00" in source:
        return None
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
        if encoding not in ("utf-8", "utf-8-sig"):
            return None
        return source.decode(encoding)
    except (SyntaxError, LookupError, UnicodeDecodeError):
        return None  # the whole-file parse words it


def _in_sections(text: str, path: str, rules: Sequence[Type[Rule]], deadline: Optional[float], project: Optional[Context]) -> FileResult:
    """A long file's findings, a section at a time, each section's tree and
    facts freed before the next is parsed. A syntax error anywhere makes the
    file's one finding, as for a file parsed whole."""
    result = FileResult()
    if skips_file(text):
        return result
    summaries: List[Summary] = []
    try:
        for section in sections(text, SECTION_BYTES):
            source = section.code.encode("utf-8")
            module, error = parse(source, path)
            if error is not None:
                error = dataclasses.replace(error, line=error.line + section.first_line - 1, end_line=error.end_line + section.first_line - 1)
                return FileResult(findings=[error])
            assert module is not None
            try:
                part = _findings(module, source, path, rules, deadline, project, section.first_line, section.last_line)
            except RecursionError:
                part = FileResult(findings=[parse_error(path, section.first_line, 1, f"cannot analyse: {TOO_DEEP}")])
            result.findings.extend(part.findings)
            result.errors.extend(part.errors)
            if part.summary is not None:
                summaries.append(part.summary)
            del module, part
            gc.collect()  # the section's own reference cycles, before the next tree
    except SyntaxError as error:
        line, column = error.lineno or 1, max(error.offset or 1, 1)
        return FileResult(findings=[parse_error(path, line, column, f"cannot parse: {error.msg}")])
    if project is not None:
        result.summary = Summary.joined(summaries)
    return result


def _findings(
    module: cst.Module,
    source: bytes,
    path: str,
    rules: Sequence[Type[Rule]],
    deadline: Optional[float] = None,
    project: Optional[Context] = None,
    first_line: int = 1,
    last_line: Optional[int] = None,
) -> FileResult:
    """The findings on `module`; for a section of a long file, those on its
    lines `first_line` to `last_line` (the imports after them are not its own)."""
    result = FileResult()
    checked = check_module(module, source, path, rules, deadline, project, first_line)
    if last_line is not None:
        checked.reports = [item for item in checked.reports if item[1] <= last_line]
    result.errors.extend(checked.errors)
    if project is not None:
        try:
            result.summary = summarize(checked.facts, project.path, project.files)
        except RecursionError:
            raise
        except Exception as error:  # the file's own findings still count
            result.errors.append(f"{path}: internal error summarizing its calls: {type(error).__name__}: {error}")
    if not checked.reports:
        return result  # no positions, no fixes: nothing to regenerate
    by_code: Dict[str, Type[Rule]] = {rule.code: rule for rule in rules}
    fixes = FixDescriber(checked.module, checked.facts.names, checked.facts.positions, checked.facts.index.parents, last_line is None)
    for report, line, column in checked.reports:
        where = checked.facts.positions[report.node]
        rule_class = by_code[report.code]
        fix = None
        if report.fix is not None:
            title = rule_class.fix_title or "Apply the fix"
            fix = fixes.describe(report.fix, title)
        result.findings.append(
            Finding(
                path=path,
                line=line,
                column=column,
                code=report.code,
                name=rule_class.name,
                end_line=where.end.line,
                end_column=where.end.column + 1,
                message=_one_line(report.message),
                severity=HARMS[report.harm] if report.harm else rule_class.severity,
                fix=fix,
                details=report.details,
            )
        )
    result.findings.sort()
    return result
