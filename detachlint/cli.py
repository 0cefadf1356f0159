"""`detachlint check|rule|rules`: a thin layer over `detachlint.api`."""

from __future__ import annotations

import argparse
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
    check.add_argument("paths", nargs="*", metavar="PATH", help="files or folders (default: .); - reads stdin")
    check.add_argument("--select", action="append", metavar="CODES", help="only these rules (codes, prefixes or ALL)")
    check.add_argument("--extend-select", action="append", metavar="CODES", help="these rules on top of the selection")
    check.add_argument("--ignore", action="append", metavar="CODES", help="leave these rules out")
    check.add_argument("--format", choices=["text", "json"], default="text", help="output format (default: text)")
    check.add_argument("--output-file", "-o", metavar="FILE", help="write the report here instead of stdout")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    check.add_argument("--quiet", "-q", action="store_true", help="print findings only, no summary")
    check.add_argument("--config", metavar="FILE", type=Path, help="use this config file instead of searching")
    check.add_argument("--stdin-filename", metavar="NAME", help="the path to report (and match config against) for -")

    rule = commands.add_parser("rule", help="print a rule's documentation")
    rule.add_argument("code", metavar="CODE")

    rules = commands.add_parser("rules", help="list every rule")
    rules.add_argument("--format", choices=["table", "json"], default="table")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            return _check(args)
        if args.command == "rule":
            return _rule(args.code)
        if args.command == "rules":
            return _rules(args.format)
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
    from detachlint.api import CheckOptions, check
    from detachlint.config import Selection
    from detachlint.report import FORMATS

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
    )
    run = check(paths, options)
    output = FORMATS[args.format](run.findings)
    if args.format == "text" and not args.quiet:
        count = len(run.findings)
        files = f"{run.files} file{'s' if run.files != 1 else ''}"
        if count:
            output += f"Found {count} finding{'s' if count != 1 else ''} in {files}.\n"
        else:
            output += f"No findings in {files}.\n"
    _write(output, args.output_file)
    for error in run.errors:
        print(f"detachlint: error: {error}", file=sys.stderr)
    if run.errors:
        return EXIT_ERROR
    if run.findings and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _write(text: str, output_file: Optional[str]) -> None:
    if output_file is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        Path(output_file).write_text(text, encoding="utf-8")
    except OSError as error:
        raise UsageError(f"cannot write {output_file}: {error.strerror or error}") from None


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
