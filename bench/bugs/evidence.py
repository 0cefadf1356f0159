"""Run every case's evidence block with real torch:
`python bench/bugs/evidence.py [CASE ...] [--root DIR] [--jsonl] [--timeout S]`.

torch is imported once; each case then runs in a forked child (its own
grad mode, seeds and globals), as `__main__`, in a scratch folder. A case
holds when it exits 0 and prints its `evidence holds:` line.
"""

from __future__ import annotations

import argparse
import json
import os
import runpy
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cases import case_paths  # noqa: E402

MARK = "evidence holds:"


def _child(path: Path, log: int) -> None:
    os.dup2(log, 1)
    os.dup2(log, 2)
    code = 0
    try:
        sys.argv = [str(path)]
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_case(path: Path, timeout: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="detachlint-evidence-") as scratch:
        log_path = os.path.join(scratch, "output.txt")
        log = os.open(log_path, os.O_WRONLY | os.O_CREAT, 0o600)
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.chdir(scratch)
            _child(path, log)
        os.close(log)
        timed_out = False
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() - started > timeout:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                timed_out, status = True, -1
                break
            time.sleep(0.01)
        seconds = time.monotonic() - started
        output = Path(log_path).read_text(encoding="utf-8", errors="replace")
    exit_code = os.waitstatus_to_exitcode(status) if not timed_out else None
    holds = exit_code == 0 and MARK in output
    return {
        "case": f"{path.parent.name}/{path.name}",
        "holds": holds,
        "exit": exit_code,
        "timed_out": timed_out,
        "seconds": round(seconds, 3),
        "output": output[-3000:],
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", type=Path, help="case files (default: every case)")
    parser.add_argument("--jsonl", action="store_true", help="one JSON object per case")
    parser.add_argument("--root", type=Path, help="every case below this folder (default: the benchmark's)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    args = parser.parse_args(argv)
    import torch  # noqa: F401  (once, before the forks)

    torch.set_num_threads(1)
    paths = [p.resolve() for p in args.cases] or case_paths(*([args.root.resolve()] if args.root else []))
    failed = 0
    for path in paths:
        result = run_case(path, args.timeout)
        failed += not result["holds"]
        if args.jsonl:
            print(json.dumps(result), flush=True)
        else:
            said = next((line for line in result["output"].splitlines() if MARK in line), "")
            print(f"{'ok  ' if result['holds'] else 'FAIL'} {result['case']} ({result['seconds']:.2f} s) {said.strip()}")
            if not result["holds"]:
                print("     " + "\n     ".join(result["output"].strip().splitlines()[-8:]))
    if not args.jsonl:
        print(f"{len(paths) - failed} of {len(paths)} cases hold their evidence")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
