"""Time detachlint against its peers on a pinned corpus of real PyTorch code.

    python bench/run.py [--runs 3] [--peers /path/to/venv/bin]

Downloads the corpus once (`pip download --no-deps` of pinned wheels, into
`~/.cache/detachlint-bench`, or `$DETACHLINT_BENCH_CACHE`), then times, side by side in one run, each command's wall
time (median of `--runs`, taken round-robin: every command once per round)
and peak memory (max RSS, children included): detachlint cold with one job
(also file by file, `--per-file`, and, with `--compare DIR`, another
checkout's) and with every core, detachlint warm (cache),
TorchFix, Fixit, flake8 with TorchFix's plugin, ruff cold and cached, and a
bare libcst parse of the files detachlint's prefilter keeps (the floor of
this design). Peers are looked up in `--peers` (a venv's bin folder) and
skipped when absent. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Outside the repository: peers that honour .gitignore would skip it otherwise.
CACHE = Path(os.environ.get("DETACHLINT_BENCH_CACHE", Path.home() / ".cache" / "detachlint-bench"))
CORPUS = ["timm==1.0.31", "accelerate==1.15.0", "lightning==2.6.6"]


def fetch_corpus() -> Path:
    root = CACHE / "bench"
    if root.is_dir():
        return root
    wheels = CACHE / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-q", "-d", str(wheels), *CORPUS],
        check=True,
    )
    for wheel in wheels.glob("*.whl"):
        name = wheel.name.split("-")[0]
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                if member.endswith(".py") and ".dist-info/" not in member:
                    archive.extract(member, root / name)
    return root


def measure_once(command, env=None):
    """Wall seconds and peak resident MB (children included) of one run."""
    timed = ["/usr/bin/time", "-f", "%M", *command] if Path("/usr/bin/time").exists() else command
    start = time.perf_counter()
    # From outside any checkout: `python -m` puts the working folder first on the path.
    result = subprocess.run(timed, capture_output=True, env=env, cwd=CACHE)
    seconds = time.perf_counter() - start
    tail = result.stderr.decode(errors="replace").strip().splitlines()
    peak = int(tail[-1]) // 1024 if timed is not command and tail and tail[-1].isdigit() else 0
    return seconds, peak


def round_robin(plan, runs: int):
    """Each command of `plan` ((label, command, env)) once per round, `runs`
    rounds: a shared machine that slows down for a minute slows every
    command alike, so the ratios between them hold. Median seconds and
    peak MB per label, in the plan's order."""
    times = {label: [] for label, _, _ in plan}
    peaks = {label: 0 for label, _, _ in plan}
    for _ in range(runs):
        for label, command, env in plan:
            seconds, peak = measure_once(command, env)
            times[label].append(seconds)
            peaks[label] = max(peaks[label], peak)
    return [(label, statistics.median(times[label]), peaks[label]) for label, _, _ in plan]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--peers", type=Path, help="bin folder with torchfix, fixit, flake8, ruff")
    parser.add_argument("--compare", type=Path, metavar="DIR", help="also time the detachlint whose source tree is DIR (cold, 1 job)")
    args = parser.parse_args()
    corpus = fetch_corpus()
    files = sorted(corpus.rglob("*.py"))
    kept = [p for p in files if b"torch" in p.read_bytes()]
    lines = sum(p.read_bytes().count(b"\n") for p in files)
    cores = os.cpu_count() or 1
    python = sys.executable
    cache_dir = Path(tempfile.mkdtemp(prefix="detachlint-bench-"))
    listing = Path(tempfile.mkstemp(suffix=".txt")[1])
    listing.write_text("\n".join(str(p) for p in kept))
    lint = [python, "-m", "detachlint", "check", str(corpus), "-q", "--exit-zero"]
    peers = args.peers
    # Python caches its own bytecode, as on a user's machine.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    plan = [
        ("bare libcst parse, prefiltered files, 1 core", [python, "-c", (
            "import sys, libcst\n"
            "for p in open(sys.argv[1]).read().split('\\n'):\n"
            "    libcst.parse_module(open(p, 'rb').read())\n"), str(listing)], env),
        ("detachlint cold, 1 job", [*lint, "--no-cache", "-j", "1"], env),
        ("detachlint cold, 1 job, --per-file", [*lint, "--no-cache", "-j", "1", "--per-file"], env),
    ]
    if args.compare:
        other = dict(env, PYTHONPATH=str(args.compare.resolve()))
        plan.append((f"detachlint of {args.compare.name}, cold, 1 job", [*lint, "--no-cache", "-j", "1"], other))
    plan.append((f"detachlint cold, {cores} jobs", [*lint, "--no-cache", "-j", str(cores)], env))
    # Warm runs read a cache filled once before the rounds; cold ones use none.
    subprocess.run([*lint, "--cache-dir", str(cache_dir)], capture_output=True, env=env)
    plan.append(("detachlint warm (cache)", [*lint, "--cache-dir", str(cache_dir)], env))
    if peers and (peers / "ruff").exists():
        ruff_cache = cache_dir / "ruff"
        plan.append(("ruff cold (default rules)", [str(peers / "ruff"), "check", "--no-cache", "--exit-zero", "-q", str(corpus)], env))
        subprocess.run([str(peers / "ruff"), "check", "--exit-zero", "-q", "--cache-dir", str(ruff_cache), str(corpus)], capture_output=True)
        plan.append(("ruff cached", [str(peers / "ruff"), "check", "--exit-zero", "-q", "--cache-dir", str(ruff_cache), str(corpus)], env))
    rows = round_robin(plan, args.runs)
    # The slow peers once each (a third of the runs), after the rounds.
    slow = []
    if peers and (peers / "torchfix").exists():
        slow.append((f"TorchFix ({cores} jobs)", [str(peers / "torchfix"), str(corpus)], env))
    if peers and (peers / "fixit").exists():
        slow.append(("Fixit", [str(peers / "fixit"), "lint", str(corpus)], env))
    if peers and (peers / "flake8").exists():
        slow.append((f"flake8 + TorchFix plugin ({cores} jobs)", [str(peers / "flake8"), "--select", "TOR", "-j", str(cores), str(corpus)], env))
    rows += round_robin(slow, max(1, args.runs // 3))
    shutil.rmtree(cache_dir, ignore_errors=True)

    ours = {label: seconds for label, seconds, _ in rows}
    reference = ours[f"detachlint cold, {cores} jobs"]
    print(f"\ncorpus: {', '.join(CORPUS)}: {len(files)} files ({len(kept)} mention torch), {lines:,} lines; "
          f"{cores} cores, Python {sys.version.split()[0]}")
    print(f"{'command':<48}{'median s':>10}{'x detachlint -j' + str(cores):>18}{'peak MB':>9}")
    for label, seconds, peak in rows:
        print(f"{label:<48}{seconds:>10.2f}{seconds / reference:>18.2f}{peak:>9}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
