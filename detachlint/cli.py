"""`detachlint check|rule|rules`: a thin layer over `detachlint.api`."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import List, Optional, Sequence

from detachlint import __version__
from detachlint.errors import UsageError

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _codes(values: Optional[List[str]]) -> Optional[List[str]]:
    if values is None:
        return None
    return [code.strip() for value in values for code in value.split(",") if code.strip()]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="detachlint", description="Find autograd misuse in PyTorch code."
    )
    parser.add_argument("--version", action="version", version=f"detachlint {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = commands.add_parser("check", help="lint files and folders")
    _check_arguments(check)
    verify = commands.add_parser("verify", help="lint and verify the findings by running them (check --verify)")
    _check_arguments(verify)

    rule = commands.add_parser("rule", help="print a rule's documentation")
    rule.add_argument("code", metavar="CODE")

    clean = commands.add_parser("clean", help="delete the cache")
    clean.add_argument("--cache-dir", metavar="DIR", type=Path, help="the cache to delete (default: .detachlint_cache)")

    commands.add_parser("lsp", help="serve diagnostics and quick fixes to an editor over stdio")

    rules = commands.add_parser("rules", help="list every rule")
    rules.add_argument("--format", choices=["table", "json", "markdown"], default="table")
    return parser


def _check_arguments(check: argparse.ArgumentParser) -> None:
    check.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: .); - reads stdin")
    check.add_argument("--select", action="append", metavar="CODES", help="only these rules (codes, prefixes or ALL)")
    check.add_argument("--extend-select", action="append", metavar="CODES", help="these rules on top of the selection")
    check.add_argument("--ignore", action="append", metavar="CODES", help="leave these rules out")
    check.add_argument(
        "--format",
        choices=["text", "concise", "json", "jsonl", "sarif", "github", "junit", "html"],
        default="text",
        help="output format (default: text)",
    )
    check.add_argument("--statistics", action="store_true", help="print how many findings each rule has, not the findings")
    check.add_argument("--output-file", "-o", metavar="FILE", help="write the report here instead of stdout")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    check.add_argument("--quiet", "-q", action="store_true", help="print findings only, no summary")
    check.add_argument("--fix", action="store_true", help="apply safe fixes")
    check.add_argument("--unsafe-fixes", action="store_true", help="with --fix or --diff, also apply unsafe fixes")
    check.add_argument("--diff", action="store_true", help="print the fixes as a unified diff; write nothing")
    check.add_argument("--jobs", "-j", type=int, metavar="N", help="processes to lint with (default: one per core)")
    check.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    check.add_argument(
        "--per-file", action="store_true", help="judge each file alone, without how the run's other files call its functions"
    )
    check.add_argument(
        "--context",
        action="append",
        metavar="PATH",
        help="also read these files or folders for how they call the linted files (their own findings are not reported)",
    )
    check.add_argument("--cache-dir", metavar="DIR", type=Path, help="where to keep the cache (default: .detachlint_cache)")
    check.add_argument("--config", metavar="FILE", type=Path, help="use this config file instead of searching")
    check.add_argument("--stdin-filename", metavar="NAME", help="the path to report (and match config against) for -")
    check.add_argument(
        "--allow-rule-paths", action="store_true", help="load the rule-paths the config file names (runs their code)"
    )
    # Verification runs the linted code: only ever switched on here, never by config.
    check.add_argument("--verify", action="store_true", help="run a reproduction of each finding with torch (runs your code)")
    check.add_argument("--verify-timeout", type=float, default=5.0, metavar="SECONDS", help="time limit per reproduction (default: 5)")
    check.add_argument("--show-refuted", action="store_true", help="with --verify, keep findings the verifier refuted")
    check.add_argument(
        "--verify-unconfined",
        action="store_true",
        help="with --verify, run reproductions even where no sandbox can be made (bubblewrap or Landlock)",
    )
    check.add_argument("--emit-repro", type=Path, metavar="DIR", help="write each finding's reproduction as a script that runs with plain python")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command in ("check", "verify"):
            if args.command == "verify":
                args.verify = True
            return _check(args)
        if args.command == "rule":
            return _rule(args.code)
        if args.command == "rules":
            return _rules(args.format)
        if args.command == "clean":
            return _clean(args.cache_dir)
        if args.command == "lsp":
            return _lsp()
        parser.print_help()
        return EXIT_ERROR
    except UsageError as error:
        print(f"detachlint: error: {error}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_CLEAN


def _check(args: argparse.Namespace) -> int:
    from detachlint.analysis.index import hash_nodes_natively
    from detachlint.api import CheckOptions, check
    from detachlint.config import Selection
    from detachlint.report import FORMATS, ReportContext

    hash_nodes_natively()  # this process is detachlint's own

    paths = args.paths or ["."]
    stdin = None
    if "-" in paths:
        stdin = sys.stdin.buffer.read()
    options = CheckOptions(
        selection=Selection(
            select=_codes(args.select),
            extend_select=_codes(args.extend_select) or (),
            ignore=_codes(args.ignore) or (),
        ),
        config_file=args.config,
        stdin=stdin,
        stdin_filename=args.stdin_filename,
        fix=args.fix,
        unsafe_fixes=args.unsafe_fixes,
        diff=args.diff,
        jobs=args.jobs,
        cache_dir=args.cache_dir,
        no_cache=args.no_cache,
        cross_module=not args.per_file,
        context=tuple(args.context or ()),
        allow_rule_paths=args.allow_rule_paths,
    )
    if args.jobs is not None and args.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if args.verify or args.emit_repro is not None:
        options = dataclasses.replace(options, verify=_verify_options(args))
    run = check(paths, options)
    if args.diff:
        _write("".join(run.diffs), args.output_file)
        _print_errors(run.errors, run.skipped)
        if not args.quiet:
            print(f"Would fix {run.fixed} finding{'s' if run.fixed != 1 else ''}.", file=sys.stderr)
        return EXIT_ERROR if run.errors else (EXIT_FINDINGS if run.diffs and not args.exit_zero else EXIT_CLEAN)
    if run.stdin_fixed is not None:
        # `check --fix -`: the fixed text goes to stdout, like a formatter.
        sys.stdout.buffer.write(run.stdin_fixed)
        sys.stdout.flush()
        _print_errors(run.errors, run.skipped)
        return EXIT_ERROR if run.errors else EXIT_CLEAN
    context = ReportContext(
        rules=run.rules, files=run.paths, errors=run.errors, unsafe_fixes=args.unsafe_fixes
    )
    if args.statistics:
        output = _statistics(run.findings, args.format, args.unsafe_fixes)
    else:
        output = FORMATS[args.format](run.findings, context)
    if args.format == "text" and not args.quiet:
        output += _summary(run, args.unsafe_fixes)
        if run.refuted:
            output += f"{run.refuted} refuted by --verify and left out (--show-refuted lists them).\n"
        sandbox = getattr(run.verify_stats, "sandbox", None)
        if sandbox:
            output += f"Reproductions ran in {sandbox}.\n"
    _write(output, args.output_file)
    _print_errors(run.errors, run.skipped)
    if run.errors:
        return EXIT_ERROR
    if run.findings and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _verify_options(args: argparse.Namespace):
    from detachlint.verify import VerifyOptions

    if args.verify_timeout <= 0:
        raise UsageError("--verify-timeout must be positive")
    progress = _progress_bar if args.verify and sys.stderr.isatty() and not args.quiet else None
    return VerifyOptions(
        run=args.verify,
        timeout=args.verify_timeout,
        emit_repro=args.emit_repro,
        show_refuted=args.show_refuted,
        unconfined=args.verify_unconfined,
        progress=progress,
    )


def _progress_bar(done: int, total: int) -> None:
    """A one-line bar on stderr, shown only for more than a few findings."""
    if total <= 3:
        return
    width = 30
    filled = width * done // total
    end = "\n" if done == total else ""
    sys.stderr.write(f"\rverifying [{'#' * filled}{'.' * (width - filled)}] {done}/{total}{end}")
    sys.stderr.flush()


def _statistics(findings, fmt: str, unsafe_fixes: bool) -> str:
    """Findings counted per rule, most frequent first."""
    from collections import Counter

    from detachlint.report import is_fixable

    counts = Counter(f.code for f in findings)
    names = {f.code: f.name for f in findings}
    fixable = {f.code for f in findings if is_fixable(f, unsafe_fixes)}
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if fmt in ("json", "jsonl"):
        data = [{"code": c, "name": names[c], "count": n, "fixable": c in fixable} for c, n in rows]
        return json.dumps(data, indent=2) + "\n"
    width = len(str(rows[0][1])) if rows else 1
    return "".join(
        f"{n:>{width}}  {c}  {'[*]' if c in fixable else '   '} {names[c]}\n" for c, n in rows
    )


def _print_errors(errors, skipped=()) -> None:
    for note in skipped:
        print(f"detachlint: warning: {note}", file=sys.stderr)
    for error in errors:
        print(f"detachlint: error: {error}", file=sys.stderr)


def _summary(run, unsafe_fixes: bool) -> str:
    count = len(run.findings)
    files = f"{run.files} file{'s' if run.files != 1 else ''}"
    lines = []
    if run.fixed:
        lines.append(f"Fixed {run.fixed} finding{'s' if run.fixed != 1 else ''}.")
    if count:
        lines.append(f"Found {count} finding{'s' if count != 1 else ''} in {files}.")
        fixable = [f for f in run.findings if f.fix and (unsafe_fixes or f.fix.applicability == "safe")]
        hidden = [f for f in run.findings if f.fix and f.fix.applicability == "unsafe" and not unsafe_fixes]
        if fixable:
            lines.append(f"[*] {len(fixable)} fixable with --fix.")
        if hidden:
            more = "more " if fixable else ""
            lines.append(f"{len(hidden)} {more}fixable with --fix --unsafe-fixes.")
    elif run.files or not run.errors:
        # Nothing was read when every path was an error: the errors say so, not "no findings".
        lines.append(f"No findings in {files}.")
    return "".join(line + "\n" for line in lines)


def _write(text: str, output_file: Optional[str]) -> None:
    if output_file is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        Path(output_file).write_text(text, encoding="utf-8")
    except OSError as error:
        raise UsageError(f"cannot write {output_file}: {error.strerror or error}") from None


def _lsp() -> int:
    try:
        from detachlint.lsp import serve
    except ImportError as error:
        raise UsageError(
            f"the language server needs pygls ({error}); install it with: pip install 'pygls>=2,<3' (or the lsp extra: pip install '.[lsp]' in detachlint's clone)"
        ) from None
    serve()
    return EXIT_CLEAN


def _clean(cache_dir: Optional[Path]) -> int:
    import shutil

    from detachlint.cache import CACHE_DIR_NAME
    from detachlint.config import find_config_file

    if cache_dir is None:
        config = find_config_file(Path.cwd())
        cache_dir = (config.parent if config else Path.cwd()) / CACHE_DIR_NAME
    if cache_dir.is_dir():
        if not (cache_dir / "CACHEDIR.TAG").exists():
            raise UsageError(f"{cache_dir} is not a detachlint cache; not deleting it")
        shutil.rmtree(cache_dir)
        print(f"Removed {cache_dir}")
    return EXIT_CLEAN


def _rule(code: str) -> int:
    from detachlint.registry import load_rules

    rules = load_rules()
    rule = rules.get(code.upper())
    if rule is None:
        raise UsageError(f"unknown rule `{code}` (see `detachlint rules`)")
    default = "on by default" if rule.default_enabled else "off by default: enable with --extend-select"
    print(f"# {rule.code} {rule.name}\n\n{default}; severity {rule.severity}.\n\n{rule.docs()}")
    return EXIT_CLEAN


def _rules(fmt: str) -> int:
    from detachlint.registry import load_rules

    rules = load_rules()
    if fmt == "markdown":
        from detachlint.docs import rules_markdown

        sys.stdout.write(rules_markdown(rules))
        return EXIT_CLEAN
    if fmt == "json":
        data = [
            {
                "code": r.code,
                "name": r.name,
                "summary": r.summary(),
                "default_enabled": r.default_enabled,
                "fixable": r.fix_title is not None,
                "severity": r.severity,
            }
            for r in rules.values()
        ]
        print(json.dumps(data, indent=2))
        return EXIT_CLEAN
    width = max(len(r.name) for r in rules.values())
    for rule in rules.values():
        flag = " " if rule.default_enabled else "*"
        print(f"{rule.code}{flag} {rule.name:<{width}}  {rule.summary()}")
    if any(not r.default_enabled for r in rules.values()):
        print("\n* off by default")
    return EXIT_CLEAN
