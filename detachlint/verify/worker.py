"""The sandboxed worker that runs reproductions, and the client that drives it.

`python -m detachlint.verify.worker` imports torch once, then serves
reproductions as JSON lines on stdin/stdout: one thread, a fresh temporary
folder that is the only place it can write (see confine.py), a scratch
directory in it per reproduction, a time limit each (an alarm inside the worker,
and a kill from the client if that does not end it), and a cap on its
address space. A reproduction that hangs, crashes the process or exhausts
memory costs only its own verdict: the client starts a new worker and the
others go on. The client side never imports torch.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional, Sequence, Tuple

from detachlint.verify import confine, sandbox

# Startup: importing torch takes seconds on a cold cache.
READY_TIMEOUT = 180.0
# What a verdict can rest on (runtime.verdict.run sets it; anything else is dropped).
BASES = ("user-code", "stand-in")
# Beyond a reproduction's alarm, how long the worker waits before killing it.
CHILD_GRACE = 1.0
# Beyond that, how long the client waits before killing the worker.
GRACE = 3.0
DEFAULT_MEMORY = 2 << 30
# Hard limits on the worker and everything it starts: the size of one file
# written, and processes (threads count) beyond those it runs at start.
FILE_BYTES = 256 << 20
PROCESSES = 64


class TorchMissing(Exception):
    """The worker could not import torch."""


class WorkerFailed(Exception):
    """The worker did not start for another reason."""


class Worker:
    """One worker process, restarted when a reproduction kills it."""

    def __init__(self, memory: int = DEFAULT_MEMORY, bwrap: Optional[str] = None, roots: Sequence[str] = ()) -> None:
        self.memory = memory
        # With bwrap, the worker runs in the sandbox with `roots` (the
        # linted projects' folders) readable; without, confined by itself.
        self.bwrap = bwrap
        self.roots = list(roots)
        self.cap: Optional[sandbox.ProcessCap] = None
        self.process: Optional[subprocess.Popen] = None
        self.lines: "queue.Queue[Optional[str]]" = queue.Queue()
        self.folder: Optional[str] = None
        self.info: Optional[dict] = None
        self.started_at = 0.0
        self.startup_seconds: Optional[float] = None
        self.restarts = 0
        self._next_id = 0
        self.asked = False

    def start(self) -> None:
        """Spawn the process; `ready()` waits for torch to load."""
        argv = [sys.executable, "-m", "detachlint.verify.worker", "--memory", str(self.memory)]
        if os.getuid() == 0:
            argv.append("--root-outside")
        if self.bwrap is None:
            # No mount namespace hides the rest of the machine: each reproduction confines its own reads.
            for path in sandbox.readable_outside_namespaces(self.roots):
                argv += ["--readable", path]
        env = sandbox.environment()
        self.cap = sandbox.ProcessCap(PROCESSES + 32)
        if self.bwrap is not None:
            # The worker's folder is the sandbox's private /tmp.
            command, cwd, preexec = sandbox.command_for(self.bwrap, argv, self.roots), None, self.cap.enter
        else:
            self.folder = tempfile.mkdtemp(prefix="detachlint-verify-")
            # Temporary files and `~` land in the worker's own folder, removed at the end.
            env["TMPDIR"] = env["HOME"] = self.folder
            command, cwd = argv, self.folder

            def preexec() -> None:
                self.cap.enter()
                _die_with_parent()
        self.lines = queue.Queue()
        self.started_at = time.monotonic()
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
            # Its own process group: whatever the reproductions spawn dies with it.
            start_new_session=True,
            preexec_fn=preexec,
            text=True,
            bufsize=1,
        )
        reader = threading.Thread(target=self._read, args=(self.process, self.lines), daemon=True)
        reader.start()
        self.info = None
        self.asked = False  # whether this process was sent a reproduction

    def containment(self) -> str:
        """What the reproductions run in, as the verdicts say it (after `ready()`)."""
        info = self.info or {}
        parts = []
        if self.bwrap is not None:
            parts.append(
                f"a bubblewrap sandbox ({sandbox.NAMESPACES}; the system, Python and the project read-only; "
                "a private /tmp; no environment; no capabilities)"
            )
        if info.get("seccomp"):
            parts.append("seccomp (no metadata changes, sockets, ptrace, new sessions or namespaces)")
        if info.get("confined") == "landlock" and info.get("reads_confined"):
            parts.append("Landlock (reads only of the system, Python and the project; writes only in its scratch folder)")
        elif info.get("confined") == "landlock":
            parts.append("Landlock (writes only in its scratch folder)")
        elif info.get("confined"):
            parts.append("an audit hook on Python-level writes")
        limits = list(info.get("limits") or [])
        if self.cap is not None and self.cap.path is not None and "processes" not in limits:
            limits.append("processes (a pids cgroup)")
        if limits:
            parts.append("hard limits (" + ", ".join(limits) + ", CPU time)")
        if self.bwrap is None and not info.get("reads_confined"):
            parts.append("no namespaces: files outside the project stay readable")
        elif self.bwrap is None:
            parts.append("no namespaces: other processes stay visible")
        return "; ".join(parts)

    def widen(self, roots: Sequence[str]) -> None:
        """Make `roots` readable too: a new sandbox (or new read rules), when they are not yet."""
        if sandbox.covers(self.roots, roots):
            return
        self.roots += [root for root in roots if root not in self.roots]
        if self.process is not None:
            self._restart()

    def _read(self, process: subprocess.Popen, lines: "queue.Queue[Optional[str]]") -> None:
        for line in process.stdout:
            if self.startup_seconds is None:
                # The first line is "ready": torch loaded, whenever we ask.
                self.startup_seconds = time.monotonic() - self.started_at
            lines.put(line)
        lines.put(None)

    def ready(self) -> dict:
        """Wait for the worker's first message; raises TorchMissing or WorkerFailed."""
        if self.process is None:
            self.start()
        if self.info is not None:
            return self.info
        try:
            line = self.lines.get(timeout=READY_TIMEOUT)
        except queue.Empty:
            self.stop()
            raise WorkerFailed(f"the verifier's worker did not start within {READY_TIMEOUT:.0f} s") from None
        if line is None:
            code = self.process.wait()
            self.stop()
            raise WorkerFailed(f"the verifier's worker exited at start (status {code})")
        message = json.loads(line)
        if not message.get("ready"):
            self.stop()
            if message.get("error") == "torch":
                raise TorchMissing(message.get("detail", ""))
            raise WorkerFailed(message.get("detail", "the verifier's worker failed to start"))
        self.info = message
        return message

    def run(self, spec: dict, timeout: float) -> Tuple[str, str]:
        """(status, evidence) for one reproduction; never raises for what the
        reproduction does. What it measured is kept in `last_details`."""
        self.last_details = None
        self.last_basis = None
        self.ready()
        self._next_id += 1
        request = {"id": self._next_id, "spec": spec, "timeout": timeout}
        self.asked = True
        try:
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._lost("the worker had exited before the reproduction started")
        deadline = time.monotonic() + timeout + GRACE
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = self.lines.get(timeout=max(remaining, 0.01))
            except queue.Empty:
                self._restart()
                return "inconclusive", f"time limit ({timeout:g} s) reached: the reproduction did not finish"
            if line is None:
                return self._lost(None)
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if message.get("id") == self._next_id:
                details = message.get("details")
                self.last_details = details if isinstance(details, dict) else None
                self.last_basis = message.get("basis") if message.get("basis") in BASES else None
                return message["status"], message["evidence"]

    def _lost(self, reason: Optional[str]) -> Tuple[str, str]:
        code = self.process.wait() if self.process is not None else None
        self._restart()
        if reason is None:
            if code is not None and code < 0:
                number = -code
                name = signal.Signals(number).name if number in signal.Signals._value2member_map_ else str(number)
                if number == signal.SIGKILL:
                    reason = f"the reproduction killed the worker ({name}; out of memory?)"
                else:
                    reason = f"the reproduction crashed the worker ({name})"
            else:
                reason = f"the reproduction ended the worker process (exit status {code})"
        return "inconclusive", reason + "; the worker was restarted"

    def _restart(self) -> None:
        self.stop(graceful=False)
        self.restarts += 1
        self.start()

    def stop(self, graceful: bool = True) -> None:
        """End the worker. Graceful: it is told there is nothing more and
        given a moment to reap the last reproduction's processes (it does
        that after sending the verdict); then its process group is killed
        either way."""
        process, self.process = self.process, None
        if process is not None:
            if graceful and self.asked and process.poll() is None:
                try:
                    process.stdin.close()
                    process.wait(timeout=GRACE)
                except (OSError, ValueError, subprocess.TimeoutExpired):
                    pass
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except OSError:  # the group is already gone
                pass
            try:
                process.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
            for stream in (process.stdin, process.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
        if self.cap is not None:
            self.cap.remove()
            self.cap = None


# ---------------------------------------------------------------------------
# The worker process itself.


class TimeLimit(BaseException):
    """The alarm rang: unwinds the user's code past its `except Exception`."""


def _on_alarm(signum, frame):
    raise TimeLimit()


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the worker, before it runs: SIGKILL when detachlint ends (bwrap's
    --die-with-parent does this in the sandbox)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass


def _warm_up(torch) -> None:
    """Pay torch's lazy imports (the optimizers pull in a compiler stack) at
    start-up, not inside the first reproduction's time limit."""
    layer = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
    layer(torch.ones(1, 2)).sum().backward()
    optimizer.step()


_MADV_COLLAPSE = 25  # Linux 6.1 and later
_HUGE = 1 << 21


def _huge_pages() -> int:
    """Back the worker's anonymous memory (torch's and the interpreter's heap,
    some 200 MB once loaded) with huge pages where the kernel can, so that
    each reproduction's fork copies one page-table entry per 2 MB instead of
    one per 4 KB, and its exit unmaps as few (a fork and an exit cost some
    20 ms each otherwise). The memory's contents and size stay as they are: a
    page the child writes is still copied 4 KB at a time. Returns the bytes
    collapsed; 0 where the kernel has no MADV_COLLAPSE or is not Linux."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        with open("/proc/self/maps") as maps:
            regions = [line.split() for line in maps]
    except (OSError, AttributeError):
        return 0
    collapsed = 0
    for fields in regions:
        low, high = (int(address, 16) for address in fields[0].split("-"))
        name = fields[5] if len(fields) > 5 else ""
        if not fields[1].startswith("rw") or fields[1][3] != "p" or name not in ("", "[heap]"):
            continue  # only private anonymous memory
        start, end = (low + _HUGE - 1) & ~(_HUGE - 1), high & ~(_HUGE - 1)
        if end > start and madvise(start, end - start, _MADV_COLLAPSE) == 0:
            collapsed += end - start
    return collapsed


def serve(memory: int, root_outside: bool = False, readable: Sequence[str] = ()) -> int:
    # The protocol gets private copies of stdin/stdout; the user's code sees
    # /dev/null, so a print() or input() in it cannot corrupt the stream.
    protocol_in = os.fdopen(os.dup(0), "r")
    protocol_out = os.fdopen(os.dup(1), "w")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)

    def send(message: dict) -> None:
        protocol_out.write(json.dumps(message) + "\n")
        protocol_out.flush()

    # Before torch loads, so every thread and process after this inherits it.
    home = os.getcwd()
    confined = confine.confine_writes(home)
    capabilities_dropped = confine.drop_capabilities()
    try:
        import torch
    except BaseException as error:  # noqa: BLE001 - a broken install can raise anything
        send({"ready": False, "error": "torch", "detail": f"{type(error).__name__}: {error}"})
        return 3
    torch.set_num_threads(1)
    try:
        # The runtime and every probe, loaded once: each reproduction's fork inherits them.
        from detachlint.verify.runtime import verdict as runner
    except BaseException as error:  # noqa: BLE001
        send({"ready": False, "error": "runtime", "detail": f"{type(error).__name__}: {error}"})
        return 3
    _warm_up(torch)
    huge = _huge_pages()
    limits = confine.hard_limits(memory, FILE_BYTES, PROCESSES, root_outside)
    # Loaded by each reproduction's process, after its CPU limit is set.
    seccomp = confine.Seccomp.build()
    if "" in sys.path:
        sys.path.remove("")
    signal.signal(signal.SIGALRM, _on_alarm)
    reaper = _become_subreaper()
    send({
        "ready": True, "torch": torch.__version__, "pid": os.getpid(), "confined": confined,
        "refused": list(confine.REFUSED), "reaper": reaper, "huge_pages": huge, "limits": limits,
        "seccomp": seccomp is not None, "capabilities_dropped": capabilities_dropped,
        # Each reproduction sets its read rules or runs nothing (`_Child`).
        "reads_confined": bool(readable) and confined == "landlock",
    })
    channel = (protocol_in.fileno(), protocol_out.fileno())
    # The next reproduction's process is forked while the client prepares its
    # request, and the last one is reaped after its verdict is sent: neither
    # is waited for in a reproduction's time.
    child = _Child(runner, home, channel, seccomp, readable)
    for line in protocol_in:
        try:
            request = json.loads(line)
        except ValueError:
            continue
        result = child.run(request, line)
        send(dict(result, id=request.get("id")))
        child.finish()
        child = _Child(runner, home, channel, seccomp, readable)
    child.finish()
    # The client waits for this exit when it stops the worker: the
    # interpreter's teardown with torch loaded (a second) would only delay it.
    protocol_out.flush()
    os._exit(0)


_PR_SET_CHILD_SUBREAPER = 36
_PR_SET_DUMPABLE = 4


def _become_subreaper() -> bool:
    """Orphans of a reproduction (a double fork, `setsid`) are re-parented to
    the worker instead of init, so `_kill_children` still finds them; and the
    worker is not dumpable, so no reproduction can open its descriptors
    through /proc/<pid>/fd. Linux only; elsewhere the process group is all."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class _Child:
    """One reproduction in a forked child of the worker, forked before its
    request comes. The child closes the worker's channel to detachlint before
    anything else, reads its request from a pipe of its own and answers on
    another: whatever the user's code does (patch torch, print JSON, write to
    any descriptor it finds, exit, crash, hang) reaches at most its own
    verdict, never another finding's or the worker. The worker enforces the
    time limit, reaps everything the child started and removes its scratch
    (`finish`), before it forks the next: one child at a time."""

    def __init__(self, runner, home: str, channel: Tuple[int, int], seccomp: Optional[confine.Seccomp], readable: Sequence[str] = ()) -> None:
        self.scratch = tempfile.mkdtemp(dir=home)
        request_read, request_write = os.pipe()
        read_end, write_end = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the reproduction's process
            try:
                os.close(read_end)
                os.close(request_write)
                for fd in channel:
                    os.close(fd)
                with os.fdopen(request_read, "rb") as requests:
                    line = requests.readline()
                if line:  # none when the worker ends
                    request = json.loads(line)
                    timeout = float(request.get("timeout") or 5.0)
                    confine.cpu_limit(timeout + CHILD_GRACE)
                    # Its own /proc entry (resolved here, in this process) and folders.
                    if readable and not confine.confine_reads([*readable, home, "/proc/self"]):
                        result = {"status": "inconclusive", "evidence": "the sandbox's Landlock read rules could not be set: nothing ran"}
                    elif seccomp is not None and not seccomp.load():
                        result = {"status": "inconclusive", "evidence": "the sandbox's seccomp filter could not be loaded: nothing ran"}
                    else:
                        result = _handle(request, runner, self.scratch, timeout)
                    os.write(write_end, json.dumps(result).encode() + b"\n")
                    # The answer ends here, not when the process has exited
                    # (unmapping what it shares with the worker takes a while).
                    os.close(write_end)
            finally:
                os._exit(0)
        os.close(request_read)
        os.close(write_end)
        self.request_write: Optional[int] = request_write
        self.read_end = read_end
        self.status: Optional[int] = None
        self.reaped = False

    def run(self, request: dict, line: str) -> dict:
        """The verdict on `request` (its JSON text is `line`)."""
        timeout = float(request.get("timeout") or 5.0)
        started = time.monotonic()
        try:
            _write_all(self.request_write, line.rstrip("\n").encode() + b"\n")
        except OSError:  # the child is gone: its status says how
            pass
        self._close_request()
        payload, in_time = _collect(self.read_end, self.pid, timeout + CHILD_GRACE)
        self.read_end = None  # closed by _collect
        if not in_time:  # killed and reaped at the time limit
            self.reaped = True
            status = None
        else:
            # A well-formed answer is the verdict, whenever the process exits;
            # anything else is read with how the process ended.
            status = 0 if _answer(payload) is not None else self.wait()
        result = _verdict(payload, status, timeout)
        result["seconds"] = round(time.monotonic() - started, 4)
        return result

    def _close_request(self) -> None:
        if self.request_write is not None:
            os.close(self.request_write)
            self.request_write = None

    def wait(self) -> int:
        """The child's exit status, reaped once."""
        if not self.reaped:
            _, self.status = os.waitpid(self.pid, 0)
            self.reaped = True
        return self.status

    def finish(self) -> None:
        """Reap the child and whatever it started, and remove its scratch. A
        child no request came for reads the end of its pipe and exits."""
        self._close_request()
        if self.read_end is not None:
            os.close(self.read_end)
            self.read_end = None
        self.wait()
        _kill_children()
        shutil.rmtree(self.scratch, ignore_errors=True)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _collect(read_end: int, pid: int, limit: float) -> Tuple[bytes, bool]:
    """What the child wrote up to the end of its answer (a newline, or the
    pipe's end), and whether that end
    came within `limit` (if not, the child is killed and reaped here)."""
    import select

    chunks, deadline = [], time.monotonic() + limit
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([read_end], [], [], remaining)[0]:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return b"".join(chunks), False
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            if chunk.endswith(b"\n"):
                # The answer is one line: processes the reproduction left
                # holding the pipe do not hold up its verdict.
                break
    finally:
        os.close(read_end)
    return b"".join(chunks), True


def _answer(payload: bytes) -> Optional[dict]:
    """The child's result when the payload is that and nothing else."""
    lines = payload.splitlines()
    try:
        result = json.loads(lines[-1]) if len(lines) == 1 else None
    except ValueError:
        result = None
    if not isinstance(result, dict) or result.get("status") not in ("confirmed", "plausible", "refuted", "inconclusive"):
        return None
    return result


def _verdict(payload: bytes, status: Optional[int], timeout: float) -> dict:
    if status is None:
        return {"status": "inconclusive", "evidence": f"time limit ({timeout:g} s) reached: the reproduction did not finish"}
    lines = payload.splitlines()
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        name = signal.Signals(number).name if number in signal.Signals._value2member_map_ else str(number)
        if number == signal.SIGKILL:
            return {"status": "inconclusive", "evidence": f"the reproduction was killed ({name}; out of memory?)"}
        return {"status": "inconclusive", "evidence": f"the reproduction crashed its process ({name})"}
    if not lines:
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
        return {"status": "inconclusive", "evidence": f"the reproduction ended its process (exit status {code}) before a verdict"}
    result = _answer(payload)
    if result is None:
        return {"status": "inconclusive", "evidence": "the reproduction wrote into the verifier's result channel"}
    return result


def _handle(request: dict, runner, scratch: str, timeout: float) -> dict:
    try:
        os.chdir(scratch)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        # A share of the time is kept for the probe's own backward and checks.
        result = runner.run(request["spec"], budget=timeout * 0.6)
    except TimeLimit:
        result = {"status": "inconclusive", "evidence": f"time limit ({timeout:g} s) reached: the reproduction did not finish"}
    except MemoryError:
        result = {"status": "inconclusive", "evidence": "memory limit reached: the reproduction ran out of memory"}
    except BaseException as error:  # noqa: BLE001 - SystemExit, KeyboardInterrupt from user code
        result = {"status": "inconclusive", "evidence": f"the reproduction stopped: {type(error).__name__}: {error}"}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return result


def _kill_children() -> None:
    """End every process a reproduction started (Linux's /proc lists them)."""
    pending = [os.getpid()]
    found = []
    while pending:
        pid = pending.pop()
        try:
            for task in os.listdir(f"/proc/{pid}/task"):
                with open(f"/proc/{pid}/task/{task}/children") as children:
                    pending.extend(int(child) for child in children.read().split())
        except OSError:
            continue
        if pid != os.getpid():
            found.append(pid)
    for pid in found:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for pid in found:
        try:
            os.waitpid(pid, 0)
        except OSError:  # not our direct child: init reaps it
            pass


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="detachlint.verify.worker")
    parser.add_argument("--memory", type=int, default=DEFAULT_MEMORY)
    parser.add_argument("--root-outside", action="store_true", help="started by root (processes are then capped by a cgroup)")
    parser.add_argument("--readable", action="append", default=[], help="with no sandbox: what a reproduction may read (repeated)")
    args = parser.parse_args(argv)
    return serve(args.memory, args.root_outside, args.readable)


if __name__ == "__main__":
    sys.exit(main())
