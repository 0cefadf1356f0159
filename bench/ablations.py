"""What each of detachlint's speed choices buys, measured one at a time.

    python bench/ablations.py [--every 4]

On the benchmark corpus of `bench/run.py` (downloaded on first use), with
every `--every`-th file that mentions torch, in one process, each pair
timed side by side on the same parsed files:

- prefilter: linting every file against skipping those that never say torch;
- walk: detachlint's own index walk against libcst's visitor walking the
  same trees (which rebuilds each node it passes);
- names: the import-alias table against libcst's scope and qualified-name
  metadata providers;
- positions: resolving positions for every file against only the files
  with a finding (what the engine does);
- offsets: in the files with a finding, regenerating the whole module for
  its ranges against only the top-level statements that hold findings
  (what the engine does);
- start-up: `detachlint --version` against importing libcst and the engine.

The parallel pool and the cache are measured by `bench/run.py` (cold with
one job and every core; warm). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider, QualifiedNameProvider, ScopeProvider

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.run import fetch_corpus  # noqa: E402
from detachlint.analysis import Facts  # noqa: E402
from detachlint.analysis.index import FileIndex  # noqa: E402
from detachlint.analysis.positions import positions as offset_positions  # noqa: E402
from detachlint.engine import lint_source  # noqa: E402
from detachlint.registry import load_rules  # noqa: E402


def timed(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def _gain(before: float, after: float) -> str:
    return f"{before / after:.1f}x" if after >= 0.01 else "all"


def median_command(command, runs=5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--every", type=int, default=4, help="take every N-th file of the corpus")
    args = parser.parse_args()
    files = sorted(fetch_corpus().rglob("*.py"))[:: args.every]
    sources = [p.read_bytes() for p in files]
    kept = [s for s in sources if b"torch" in s]
    rules = [rule for rule in load_rules().values() if rule.default_enabled]
    rows = []

    def lint_all(prefilter):
        for path, source in zip(files, sources):
            lint_source(source, str(path), rules, prefilter=prefilter)

    # Alternate the two, twice, and keep each one's best: the first pass pays imports and warm-up.
    every, skipping = [], []
    for _ in range(2):
        every.append(timed(lambda: lint_all(False)))
        skipping.append(timed(lambda: lint_all(True)))
    rows.append(("prefilter", "lint every file", min(every), "skip files without `torch`", min(skipping)))

    modules = [cst.parse_module(s) for s in kept]

    class Nothing(cst.CSTVisitor):
        pass

    rows.append(("walk", "libcst visitor", timed(lambda: [m.visit(Nothing()) for m in modules]), "own index walk", timed(lambda: [FileIndex(m) for m in modules])))

    def providers():
        for module in modules:
            MetadataWrapper(module).resolve_many([ScopeProvider, QualifiedNameProvider])

    def alias_table():
        for module in modules:
            Facts(module).names.aliases

    rows.append(("names", "scope + qualified-name metadata", timed(providers), "index walk + alias table", timed(alias_table)))

    with_findings = [lint_source(s, "f.py", rules).findings for s in kept]

    def positions(only_found):
        for module, found in zip(modules, with_findings):
            if found or not only_found:
                MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)

    rows.append(("positions", "every file", timed(lambda: positions(False)), "files with a finding", timed(lambda: positions(True))))

    # In a file with findings: ranges from regenerating the whole module, or
    # only the top-level statements that hold the findings (what the engine does).
    flagged = []
    for module, source, found in zip(modules, kept, with_findings):
        if found:
            index = FileIndex(module)
            whole = offset_positions(module)
            lines = {finding.line for finding in found}
            holding = [s for s in module.body if any(whole[s].start.line <= line <= whole[s].end.line for line in lines)]
            flagged.append((module, index, source, holding))

    def regenerate(by_statement):
        for module, index, source, holding in flagged:
            table = offset_positions(module, index.parents, source if by_statement else None)
            for statement in holding:
                table[statement]

    rows.append(("offsets", "regenerate the whole module", timed(lambda: regenerate(False)), "statements with a finding", timed(lambda: regenerate(True))))

    heavy = [sys.executable, "-c", "import libcst, detachlint.engine, detachlint.registry; detachlint.registry.load_rules()"]
    light = [sys.executable, "-m", "detachlint", "--version"]
    rows.append(("start-up", "import libcst and the rules", median_command(heavy), "`detachlint --version`", median_command(light)))

    lines = sum(s.count(b"\n") for s in sources)
    print(f"{len(files)} files ({len(kept)} mention torch), {lines:,} lines; Python {sys.version.split()[0]}")
    print(f"{'choice':<11}{'without':<34}{'s':>8}   {'with':<28}{'s':>8}{'gain':>8}")
    for name, before_label, before, after_label, after in rows:
        print(f"{name:<11}{before_label:<34}{before:>8.2f}   {after_label:<28}{after:>8.2f}{_gain(before, after):>8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
