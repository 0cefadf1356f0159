"""Lint real PyTorch code nobody here wrote, and report what happened.

    python bench/corpus.py [--runs N] [--out findings.json] [--torch]

Downloads pinned wheels (`pip download --no-deps`) into `bench/.corpus/`
(ignored by git), unpacks them, lints each package with every default rule,
and prints per package: files, lines, findings per rule, internal errors,
the median wall time over `--runs` runs and files per second. `--torch` adds
the installed torch package's own Python files. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics
import subprocess
import sys
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from detachlint.api import check  # noqa: E402

CORPUS = {
    "transformers": "transformers==5.23.0",
    "timm": "timm==1.0.31",
}
CACHE = HERE / ".corpus"


def fetch(name: str, requirement: str) -> Path:
    target = CACHE / name
    if target.is_dir():
        return target
    CACHE.mkdir(exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-q", "-d", str(CACHE), requirement],
        check=True,
    )
    wheel = next(CACHE.glob(f"{name}-*.whl"))
    zipfile.ZipFile(wheel).extractall(target)
    return target


def measure(folder: Path, runs: int):
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = check([str(folder)])
        times.append(time.perf_counter() - start)
    files = [p for p in folder.rglob("*.py")]
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    return result, statistics.median(times), len(files), lines


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--torch", action="store_true", help="also lint the installed torch package")
    parser.add_argument("--package", action="append", help="name=requirement to add to the corpus")
    args = parser.parse_args()
    corpus = dict(CORPUS)
    for extra in args.package or ():
        name, _, requirement = extra.partition("=")
        corpus[name] = requirement.lstrip("=") or name
    folders = {name: fetch(name, req) for name, req in corpus.items()}
    if args.torch:
        import importlib.util

        folders["torch"] = Path(importlib.util.find_spec("torch").origin).parent
    everything = []
    print(f"{'package':<22}{'files':>7}{'lines':>10}{'time s':>9}{'files/s':>9}  findings")
    for name, folder in folders.items():
        result, seconds, files, lines = measure(folder, args.runs)
        counts = collections.Counter(f.code for f in result.findings)
        summary = ", ".join(f"{code} {n}" for code, n in sorted(counts.items())) or "none"
        errors = len([e for e in result.errors if "internal error" in e])
        print(f"{name:<22}{files:>7}{lines:>10}{seconds:>9.1f}{files / seconds:>9.1f}  {summary}; internal errors {errors}")
        for error in result.errors:
            print(f"    {error}")
        everything.extend(dict(f.to_json(), package=name) for f in result.findings)
    if args.out:
        args.out.write_text(json.dumps(everything, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
