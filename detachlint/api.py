"""The one call every front end makes: paths and options in, findings out."""

from __future__ import annotations

import dataclasses
import difflib
import json
import multiprocessing
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Type

from detachlint.analysis.index import hash_nodes_natively, nodes_hash_natively
from detachlint.analysis.project import NOTHING_ELSEWHERE, Context, Elsewhere, ProjectFiles, Summary, file_key, incoming
from detachlint.cache import CACHE_DIR_NAME, Cache, fingerprint
from detachlint.config import Config, Selection, enabled_codes, expand, find_config_file, load_config
from detachlint.discovery import Target, discover, matches
from detachlint.engine import PARSE_ERROR_CODE, FileResult, parse_error, lint_source
from detachlint.errors import UsageError
from detachlint.finding import Finding
from detachlint.fixer import fix_source, write_atomically
from detachlint.notebook import NotebookError, Program, is_notebook
from detachlint.registry import load_rules
from detachlint.rule import Rule
from detachlint.verify import Verifier, VerifyOptions
from detachlint.verify.sandbox import project_roots


@dataclass(frozen=True)
class CheckOptions:
    selection: Selection = Selection()
    config_file: Optional[Path] = None
    stdin: Optional[bytes] = None  # the text of `-`
    stdin_filename: Optional[str] = None
    fix: bool = False  # write fixed files
    unsafe_fixes: bool = False  # also apply fixes that change behaviour
    diff: bool = False  # compute the fixes' diffs, write nothing
    jobs: Optional[int] = None  # processes; None: one per core
    cache_dir: Optional[Path] = None  # None: .detachlint_cache beside the config (or here)
    no_cache: bool = False
    # Run each finding's reproduction (runs the linted code: only on request).
    verify: Optional[VerifyOptions] = None
    # Follow calls between the files of the run (`analysis/project.py`).
    cross_module: bool = True
    # Paths whose files are read only for what they say of the linted ones.
    context: Tuple[str, ...] = ()
    # Load the `rule-paths` a config file names: they are code, and a config
    # found in the linted tree belongs to whoever wrote that tree.
    allow_rule_paths: bool = False


@dataclass
class RunResult:
    findings: List[Finding] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)  # unreadable paths, internal errors
    files: int = 0
    paths: List[str] = field(default_factory=list)  # the files linted, as displayed
    fixed: int = 0  # fixes applied (or, with diff, that would be)
    diffs: List[str] = field(default_factory=list)
    stdin_fixed: Optional[bytes] = None  # `-` with fix: the fixed text
    rules: Dict[str, Type[Rule]] = field(default_factory=dict)  # the rules that ran
    refuted: int = 0  # findings the verifier refuted and left out of `findings`
    skipped: List[str] = field(default_factory=list)  # files over their budget, with why
    verify_stats: Optional[object] = None  # detachlint.verify.Stats when verifying
    # What each linted file tells the others (file_key -> Summary).
    summaries: Dict[str, Summary] = field(default_factory=dict)


@dataclass(frozen=True)
class Setup:
    """Everything decided before the first file is read."""

    config: Config
    rules: Dict[str, Type[Rule]]
    enabled: frozenset
    cache: Optional[Cache] = None
    notes: Tuple[str, ...] = ()  # warnings for the user (rule-paths not loaded)


def prepare(paths: Sequence[str], options: CheckOptions) -> Setup:
    if options.config_file is not None:
        if not options.config_file.is_file():
            raise UsageError(f"config file not found: {options.config_file}")
        config = load_config(options.config_file)
    else:
        anchor = next((p for p in paths if p != "-"), None)
        if anchor is None and options.stdin_filename:
            anchor = options.stdin_filename
        start = Path(anchor) if anchor else Path.cwd()
        if not start.exists():
            start = Path.cwd()
        config = load_config(find_config_file(start))
    notes: Tuple[str, ...] = ()
    if config.rule_paths and not options.allow_rule_paths:
        folders = ", ".join(str(folder) for folder in config.rule_paths)
        notes = (
            f"{config.path} names rule-paths ({folders}); they were not loaded, since loading them runs "
            "their code: pass --allow-rule-paths to load them",
        )
        config = dataclasses.replace(config, rule_paths=())
    rules = load_rules(config.rule_paths)
    codes = list(rules)
    default = [code for code, rule in rules.items() if rule.default_enabled]
    # Codes of the rules not loaded may stand in the file's selection.
    enabled = enabled_codes([config.selection, options.selection], codes, default, lenient=config.selection.origin if notes else None)
    for glob, ignored in config.per_file_ignores.items():
        expand(ignored, codes + [PARSE_ERROR_CODE], str(config.path), f"per-file-ignores[{glob!r}]", bool(notes))
    unknown = sorted(code for code in config.severity if code not in rules and code != PARSE_ERROR_CODE)
    if unknown and not notes:
        raise UsageError(f"{config.path}: unknown rule code `{unknown[0]}` in severity")
    cache = None
    if not options.no_cache:
        folder = options.cache_dir or (config.root / CACHE_DIR_NAME)
        code = [p for p in Path(__file__).resolve().parent.rglob("*.py")]
        code += [Path(sys.modules[rule.__module__].__file__) for rule in rules.values()]
        cache = Cache(folder, fingerprint(code))
    return Setup(config, rules, frozenset(enabled), cache, notes)


def rules_for(target_path: Path, setup: Setup) -> List[Type[Rule]]:
    codes = set(setup.enabled)
    for glob, ignored in setup.config.per_file_ignores.items():
        if matches([glob], target_path, setup.config.root):
            codes -= expand(ignored, list(setup.rules) + [PARSE_ERROR_CODE], "", "", lenient=True)
    return [setup.rules[code] for code in sorted(codes) if code in setup.rules]


def _parse_errors_ignored(target_path: Path, setup: Setup) -> bool:
    for glob, ignored in setup.config.per_file_ignores.items():
        if matches([glob], target_path, setup.config.root) and PARSE_ERROR_CODE in expand(
            ignored, list(setup.rules) + [PARSE_ERROR_CODE], "", "", lenient=True
        ):
            return True
    return False


def lint_target(
    display: str, path: Path, source: bytes, setup: Setup, project: Optional[Context] = None, cached_only: bool = False
) -> Optional[FileResult]:
    """The file's result, from the cache when it holds one; with
    `cached_only`, None instead of linting."""
    rules = rules_for(path, setup)
    key = None
    if setup.cache is not None:
        extra = [str(_parse_errors_ignored(path, setup))]
        if project is not None:
            # File by file or in a run of several, and what the others say of it.
            extra.append(json.dumps(project.elsewhere.to_json()))
        key = setup.cache.key(source, display, [rule.code for rule in rules] + extra)
        hit = setup.cache.load(key)
        if hit is not None:
            findings, errors, summary = hit
            return FileResult(findings, errors, summary=summary)
    if cached_only:
        return None
    result = lint_source(source, display, rules, seconds=setup.config.max_file_seconds, project=project)
    if result.skipped is not None:
        return result  # a budget depends on the machine: never cached
    if _parse_errors_ignored(path, setup):
        result.findings = [f for f in result.findings if f.code != PARSE_ERROR_CODE]
    if key is not None:
        setup.cache.store(key, result.findings, result.errors, result.summary)
    return result


def _fix(
    display: str, path: Optional[Path], source: bytes, setup: Setup, options: CheckOptions, run: RunResult, project: Optional[Context] = None
) -> bytes:
    """Apply fixes as `options` asks; the source to report findings on."""
    fixed = fix_source(source, display, rules_for(path or Path(display), setup), options.unsafe_fixes, project)
    return _deliver(display, path, source, fixed.source, fixed.applied, options, run)


def _deliver(display: str, path: Optional[Path], old: bytes, new: bytes, applied: int, options: CheckOptions, run: RunResult) -> bytes:
    """Write (or diff) a fixed file; the text that is now the file's."""
    if not applied:
        return old
    run.fixed += applied
    if options.diff:
        run.diffs.append(unified_diff(display, old, new))
        return old
    if path is None:
        run.stdin_fixed = new
        return new
    try:
        write_atomically(path, new, old)
    except UsageError as error:
        run.fixed -= applied
        run.errors.append(str(error))
        return old
    return new


def _lint_notebook(display: str, path: Optional[Path], source: bytes, setup: Setup, options: CheckOptions, run: RunResult) -> RunResult:
    """A notebook's code cells, linted (and fixed) as one program."""
    run.files = 1
    run.paths.append(display)
    try:
        program = Program.from_bytes(source)
    except NotebookError as error:
        run.findings.append(parse_error(display, 1, 1, str(error)))
        return run
    if program is None:
        return run  # a notebook in another language
    if _over_size(display, len(program.text.encode()), setup, run):
        return run
    if options.fix or options.diff:
        fixed = fix_source(program.text.encode(), display, rules_for(path or Path(display), setup), options.unsafe_fixes)
        if fixed.applied:
            try:
                notebook = program.with_program(fixed.source.decode("utf-8"))
            except NotebookError as error:
                run.errors.append(f"{display}: {error}")
            else:
                source = _deliver(display, path, source, notebook, fixed.applied, options, run)
                program = Program.from_bytes(source) or program
    result = lint_target(display, path or Path(display), program.text.encode(), setup)
    run.findings.extend(program.to_cells(finding) for finding in result.findings)
    if result.skipped:
        run.skipped.append(result.skipped)
    if not _parse_errors_ignored(path or Path(display), setup):
        for cell, line, column, message in program.cell_errors:
            run.findings.append(dataclasses.replace(parse_error(display, line, column, message), cell=cell))
    run.errors.extend(result.errors)
    return run


def unified_diff(display: str, old: bytes, new: bytes) -> str:
    lines = difflib.unified_diff(
        old.decode("utf-8", "replace").splitlines(keepends=True),
        new.decode("utf-8", "replace").splitlines(keepends=True),
        fromfile=display if os.path.isabs(display) else f"a/{display}",
        tofile=display if os.path.isabs(display) else f"b/{display}",
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def _over_size(display: str, size: int, setup: Setup, run: "RunResult") -> bool:
    """Whether a file is over the size budget; if so, noted as skipped.
    Machine-made code, not code to review: parsing it costs seconds and
    gigabytes. Said on stderr, not a failure."""
    limit = setup.config.max_file_kb
    if size <= limit * 1024:
        return False
    run.skipped.append(f"{display}: skipped: {size / 1024:,.0f} KiB is over the {limit:,} KiB budget; raise max-file-kb to lint it")
    return True


def _lint_file(
    display: str,
    path: Optional[Path],
    source: Optional[bytes],
    setup: Setup,
    options: CheckOptions,
    project: Optional[Context] = None,
    cached_only: bool = False,
) -> Optional[RunResult]:
    """Everything one file contributes to a run (read, fix, lint): with
    `project`, knowing the calls the run's other files make of it. With
    `cached_only`, None unless the cache holds it (notebooks and fixes
    always go on to the linting)."""
    run = RunResult()
    notebook = is_notebook(display)
    if source is None:
        try:
            # A notebook's outputs (images) can be large: its code is judged below.
            if not notebook and _over_size(display, path.stat().st_size, setup, run):
                return run
            source = path.read_bytes()
        except OSError as error:
            run.errors.append(f"{display}: cannot read: {error.strerror or error}")
            return run
    elif not notebook and _over_size(display, len(source), setup, run):
        return run
    if cached_only and (notebook or options.fix or options.diff):
        return None
    if notebook:
        return _lint_notebook(display, path, source, setup, options, run)
    if options.fix or options.diff:
        source = _fix(display, path, source, setup, options, run, project)
    result = lint_target(display, path or Path(display), source, setup, project, cached_only)
    if result is None:
        return None
    if result.summary is not None and path is not None:
        run.summaries[file_key(path)] = result.summary
    run.findings.extend(result.findings)
    run.errors.extend(result.errors)
    if result.skipped:
        run.skipped.append(result.skipped)
    run.files = 1
    run.paths.append(display)
    return run


def _merge(into: RunResult, part: RunResult) -> None:
    into.findings.extend(part.findings)
    into.errors.extend(part.errors)
    into.skipped.extend(part.skipped)
    into.files += part.files
    into.paths.extend(part.paths)
    into.fixed += part.fixed
    into.diffs.extend(part.diffs)
    into.summaries.update(part.summaries)
    if part.stdin_fixed is not None:
        into.stdin_fixed = part.stdin_fixed


# Worker processes rebuild the setup once (rules are loaded from their files).
_WORKER: dict = {}


def _start_worker(
    config: Config, enabled: frozenset, cache: Optional[Cache], options: CheckOptions, files: Optional[ProjectFiles], native_hash: bool
) -> None:
    if native_hash:
        hash_nodes_natively()  # as in the parent (a spawned worker starts without it)
    _WORKER["setup"] = Setup(config, load_rules(config.rule_paths), enabled, cache)
    _WORKER["options"] = options
    _WORKER["files"] = files


# What a batch asks of a file: its findings, its findings after fixing it,
# or only its summary (a file given with --context).
LINT, FIX, SUMMARY = "lint", "fix", "summary"
Item = Tuple[Target, Optional[Elsewhere], str]


def _lint_chunk(chunk: Sequence[Item]) -> List[RunResult]:
    setup, options, files = _WORKER["setup"], _WORKER["options"], _WORKER["files"]
    return [_lint_one(target, elsewhere, what, setup, options, files) for target, elsewhere, what in chunk]


def _lint_one(
    target: Target,
    elsewhere: Optional[Elsewhere],
    what: str,
    setup: Setup,
    options: CheckOptions,
    files: Optional[ProjectFiles],
    cached_only: bool = False,
) -> Optional[RunResult]:
    if what != FIX:
        options = dataclasses.replace(options, fix=False, diff=False)
    if what == SUMMARY:
        setup = dataclasses.replace(setup, enabled=frozenset())  # no rule runs
    project = Context(files, target.path, elsewhere or NOTHING_ELSEWHERE) if files is not None else None
    return _lint_file(target.display, target.path, None, setup, options, project, cached_only)


def default_jobs() -> int:
    return os.cpu_count() or 1


def check(paths: Sequence[str], options: CheckOptions = CheckOptions()) -> RunResult:
    """Lint `paths` (`-` is stdin) and return every finding, sorted by path and position."""
    setup = prepare(paths, options)
    if options.verify is None:
        return _check(paths, options, setup)
    # The worker imports torch while the files are linted.
    verifier = Verifier(options.verify)
    verifier.start(project_roots(paths))
    try:
        run = _check(paths, options, setup)
        stdin_display = (options.stdin_filename or "-") if "-" in paths else None

        def read(display: str) -> Optional[bytes]:
            # Displays are the paths as given (relative to here), read again
            # after any --fix, so the text matches the findings' positions.
            if display == stdin_display:
                return run.stdin_fixed or options.stdin or b""
            try:
                return Path(display).read_bytes()
            except OSError:
                return None

        # A notebook's findings are verified on its program, then located
        # by cell again.
        programs: Dict[str, Optional[Program]] = {}
        for display in {f.path for f in run.findings if f.cell is not None}:
            try:
                programs[display] = Program.from_bytes(read(display) or b"")
            except NotebookError:
                programs[display] = None

        def source_of(display: str) -> Optional[str]:
            if display in programs:
                program = programs[display]
                return program.text if program else None
            source = read(display)
            return None if source is None else source.decode("utf-8", "replace")

        def in_program(finding: Finding) -> Finding:
            program = programs.get(finding.path)
            return program.to_program(finding) if program and finding.cell is not None else finding

        def in_cells(verified: Finding, was: Finding) -> Finding:
            program = programs.get(was.path)
            if program is None or was.cell is None or verified.verification is None:
                return verified if was.cell is None else dataclasses.replace(was, verification=verified.verification)
            evidence = program.words(verified.verification.evidence, was.cell)
            return dataclasses.replace(was, verification=dataclasses.replace(verified.verification, evidence=evidence))

        verified = verifier.verify([in_program(f) for f in run.findings], source_of)
        findings = [in_cells(f, was) for f, was in zip(verified, run.findings)]
        run.verify_stats = verifier.stats
    finally:
        verifier.close()
    kept = [f for f in findings if options.verify.show_refuted or f.verification is None or f.verification.status != "refuted"]
    run.refuted = len(findings) - len(kept)
    run.findings = kept
    return run


def _check(paths: Sequence[str], options: CheckOptions, setup: Setup) -> RunResult:
    run = RunResult(rules={code: setup.rules[code] for code in sorted(setup.enabled) if code in setup.rules})
    run.skipped.extend(setup.notes)
    file_paths = [p for p in paths if p != "-"]
    targets, run.errors = discover(file_paths, setup.config)
    if "-" in paths:
        display = options.stdin_filename or "-"
        _merge(run, _lint_file(display, None, options.stdin or b"", setup, options))
    context: List[Target] = []
    if options.cross_module and options.context:
        # Files read only for what they say of the linted ones.
        given = {file_key(t.path) for t in targets}
        found, errors = discover(list(options.context), setup.config)
        run.errors.extend(errors)
        context = [t for t in found if file_key(t.path) not in given and not is_notebook(t.display)]
    files = ProjectFiles(t.path for t in targets + context) if options.cross_module else None
    if not files:
        files = None  # one file: nothing crosses
    fixing = options.fix or options.diff
    everything = targets + context
    jobs = min(options.jobs or default_jobs(), len(everything))
    with _Runner(jobs if len(everything) >= 4 else 1, setup, options, files) as runner:
        first = FIX if fixing and files is None else LINT
        parts = runner.run([(t, None, first) for t in targets] + [(t, None, SUMMARY) for t in context])
        if files is not None:
            parts = _follow_calls(everything, len(targets), parts, runner, fixing)
    for part in parts[: len(targets)]:
        _merge(run, part)
    if setup.config.severity:
        # The user's severity for a rule, over the one its harm gives.
        run.findings = [
            dataclasses.replace(f, severity=setup.config.severity[f.code]) if f.code in setup.config.severity else f
            for f in run.findings
        ]
    run.findings.sort()
    run.diffs.sort()
    run.paths.sort()
    return run


# Rounds of re-linting a file whose callers elsewhere changed what it knows:
# a chain of helpers across files (train.py -> engine.py -> utils.py) takes one each.
MAX_CROSS_MODULE_ROUNDS = 4


def _follow_calls(targets: Sequence[Target], linted: int, parts: List[RunResult], runner: "_Runner", fixing: bool) -> List[RunResult]:
    """Lint again each file whose functions other files call in a way that
    changes its analysis (`project.incoming`), until nothing changes; then,
    when fixing, fix every file knowing its callers. Files whose callers
    change nothing keep their first result: they are parsed once. The
    targets past the first `linted` are context: summarized, not linted."""
    keys = [file_key(t.path) for t in targets]
    what = [LINT if i < linted else SUMMARY for i in range(len(targets))]
    known: List[Elsewhere] = [NOTHING_ELSEWHERE for _ in targets]
    for _ in range(MAX_CROSS_MODULE_ROUNDS):
        summaries: Dict[str, Summary] = {}
        for part in parts:
            summaries.update(part.summaries)
        facts = incoming(summaries)
        again = [i for i, key in enumerate(keys) if facts.get(key, NOTHING_ELSEWHERE) != known[i]]
        if not again:
            break
        for i in again:
            known[i] = facts.get(keys[i], NOTHING_ELSEWHERE)
        for i, part in zip(again, runner.run([(targets[i], known[i], what[i]) for i in again])):
            parts[i] = part
    if fixing:
        parts[:linted] = runner.run([(t, known[i], FIX) for i, t in enumerate(targets[:linted])])
    return parts


class _Runner:
    """Lints batches of files, in this process or a pool of `jobs` processes
    started for the first batch the cache cannot answer, kept for the run."""

    def __init__(self, jobs: int, setup: Setup, options: CheckOptions, files: Optional[ProjectFiles]) -> None:
        self.jobs, self.setup, self.options, self.files = jobs, setup, options, files
        self.pool = None

    def __enter__(self) -> "_Runner":
        return self  # the pool starts when a batch first needs it

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.pool.terminate()
            self.pool.join()

    def run(self, items: Sequence[Item]) -> List[RunResult]:
        if self.jobs <= 1 or len(items) < 4:
            return [_lint_one(t, e, f, self.setup, self.options, self.files) for t, e, f in items]  # type: ignore[misc]
        # What the cache holds is read here: a warm run starts no processes.
        parts: List[Optional[RunResult]] = [
            _lint_one(t, e, f, self.setup, self.options, self.files, cached_only=True) if self.setup.cache is not None else None
            for t, e, f in items
        ]
        missing = [i for i, part in enumerate(parts) if part is None]
        if len(missing) < 4:
            for i in missing:
                parts[i] = _lint_one(*items[i], self.setup, self.options, self.files)
            return parts  # type: ignore[return-value]
        if self.pool is None:
            start = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
            context = multiprocessing.get_context(start)
            self.pool = context.Pool(
                self.jobs,
                _start_worker,
                (self.setup.config, self.setup.enabled, self.setup.cache, self.options, self.files, nodes_hash_natively()),
            )
        # Chunks keep small files from paying a round trip each.
        size = max(1, min(32, len(missing) // (self.jobs * 4)))
        chunks = [[items[i] for i in missing[j : j + size]] for j in range(0, len(missing), size)]
        linted = [part for results in self.pool.imap(_lint_chunk, chunks) for part in results]
        for i, part in zip(missing, linted):
            parts[i] = part
        return parts  # type: ignore[return-value]
