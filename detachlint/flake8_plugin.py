"""detachlint's rules inside flake8: `flake8 --select DL`.

flake8 hands over the file's lines; detachlint parses them itself (flake8's
`ast` tree is no use to libcst). Which rules run is detachlint's own
configuration for that file (defaults, `[tool.detachlint]`, per-file
ignores); flake8's `--select`/`--ignore` then filter the codes as usual.
"""

from __future__ import annotations

from typing import Iterator, List, Tuple

from detachlint import __version__


class DetachlintChecker:
    name = "detachlint"
    version = __version__

    def __init__(self, tree, filename: str, lines: List[str]) -> None:
        self.filename = filename
        self.lines = lines

    def run(self) -> Iterator[Tuple[int, int, str, type]]:
        from detachlint.api import CheckOptions, check
        from detachlint.errors import UsageError

        source = "".join(self.lines).encode("utf-8")
        name = None if self.filename in ("-", "stdin") else self.filename
        try:
            run = check(["-"], CheckOptions(stdin=source, stdin_filename=name, no_cache=True))
        except UsageError as error:
            yield 1, 0, f"DL000 detachlint cannot run: {error}", type(self)
            return
        for finding in run.findings:
            # flake8 columns are 0-based; it adds one when printing.
            yield finding.line, finding.column - 1, f"{finding.code} {finding.message}", type(self)
