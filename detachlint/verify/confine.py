"""What the verifier's worker does to itself and to each reproduction it forks.

`confine_writes`: the worker folder is the only place a reproduction can write.

On Linux 5.13 and later this is Landlock: the kernel refuses every write,
create, delete or rename outside the folder, for the worker, every thread
it starts and every process it spawns. Reading stays allowed everywhere,
since torch and the user's imports have to be read. Where the kernel has
them, Landlock also refuses every TCP bind and connect, loopback included
(6.7 and later), and signals to processes and abstract unix sockets outside
the worker (6.12 and later). It does not handle metadata (chmod, chown,
timestamps): an audit hook refuses Python-level changes outside the folder,
which native code and child processes get past. UDP and unix sockets with a
path stay possible. Elsewhere a Python audit hook refuses Python-level
writes outside the folder: best effort, native code and child processes
get past it.

`confine_reads`: where no mount namespace hides the rest of the machine, a
second Landlock layer in each reproduction's process lets it read and run
only the system's libraries, Python and its packages, the linted projects,
its scratch folder and its own /proc entry: not the caller's home, other
processes' environments or `/etc`.

`hard_limits` and `Seccomp`: limits a reproduction cannot raise, and the
system calls it may not make (see their docstrings). In the bubblewrap
sandbox (`sandbox.py`) these come on top of its namespaces; without it they
are most of what holds.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from typing import List, Optional, Sequence

# Landlock's ABI (include/uapi/linux/landlock.h); the syscall numbers are
# the same on every architecture.
_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

_WRITE_FILE = 1 << 1
_WRITES_IN_DIRS = sum(1 << bit for bit in range(4, 13))  # remove and make, every kind
_REFER = 1 << 13  # ABI 2: rename and link across folders
_TRUNCATE = 1 << 14  # ABI 3


# ABI 4: TCP bind and connect; ABI 6: scopes (abstract unix sockets, signals).
_BIND_TCP, _CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1

# What the last confine_writes() managed beyond writes, for the worker to report.
REFUSED = []


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def confine_writes(folder: str) -> str:
    """Confine this process's writes to `folder`; returns how ("landlock" or
    "audit hook")."""
    if sys.platform.startswith("linux") and _landlock(folder):
        # Landlock does not handle metadata: Python-level changes are refused here.
        _audit_hook(folder, metadata_only=True)
        return "landlock"
    _audit_hook(folder)
    return "audit hook"


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        syscall = ctypes.CDLL(None, use_errno=True).syscall
    except (OSError, AttributeError):
        return 0
    syscall.restype = ctypes.c_long
    return max(0, syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)))


def _landlock(folder: str) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        syscall = libc.syscall
    except (OSError, AttributeError):
        return False
    syscall.restype = ctypes.c_long
    abi = syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    if abi < 1:
        return False  # no Landlock in this kernel, or turned off
    handled = _WRITE_FILE | _WRITES_IN_DIRS | (_REFER if abi >= 2 else 0) | (_TRUNCATE if abi >= 3 else 0)
    # With no rule allowing a port, every TCP bind and connect is refused (ABI 4),
    # and the worker can neither reach abstract unix sockets nor signal
    # processes outside its own domain (ABI 6).
    net = _BIND_TCP | _CONNECT_TCP if abi >= 4 else 0
    scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0
    attr = _RulesetAttr(handled, net, scoped)
    size = ctypes.sizeof(ctypes.c_uint64) * (3 if abi >= 6 else 2 if abi >= 4 else 1)
    ruleset = syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return False
    try:
        file_rights = handled & (_WRITE_FILE | _TRUNCATE)
        allowed = [(folder, handled), (os.devnull, file_rights)]
        for path, rights in allowed:
            if not _allow(syscall, ruleset, path, rights):
                return False
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return False
        if syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return False
        REFUSED[:] = (["tcp"] if net else []) + (["signals", "abstract sockets"] if scoped else [])
        return True
    finally:
        os.close(ruleset)


_EXECUTE, _READ_FILE, _READ_DIR = 1 << 0, 1 << 2, 1 << 3


def confine_reads(readable: Sequence[str]) -> bool:
    """A further Landlock layer for a reproduction's process where no mount
    namespace hides the rest of the machine: from here on it reads and runs
    files only beneath `readable` (paths that do not exist are left out).
    False where Landlock is not available or a rule could not be made."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        syscall = libc.syscall
    except (OSError, AttributeError):
        return False
    syscall.restype = ctypes.c_long
    if syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)) < 1:
        return False
    handled = _EXECUTE | _READ_FILE | _READ_DIR
    attr = _RulesetAttr(handled, 0, 0)
    ruleset = syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(ctypes.c_uint64)), ctypes.c_uint32(0))
    if ruleset < 0:
        return False
    try:
        for path in readable:
            if not os.path.exists(path):
                continue
            # A rule on a file may grant only what applies to files.
            rights = handled if os.path.isdir(path) else _EXECUTE | _READ_FILE
            if not _allow(syscall, ruleset, path, rights):
                return False
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return False
        return syscall(_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) == 0
    finally:
        os.close(ruleset)


def _allow(syscall, ruleset: int, path: str, rights: int) -> bool:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        beneath = _PathBeneathAttr(rights, fd)
        added = syscall(_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(beneath), ctypes.c_uint32(0))
        return added == 0
    finally:
        os.close(fd)


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# Audit events that change the path(s) in their first argument(s).
_ONE_PATH = {"os.remove", "os.rmdir", "os.mkdir", "os.truncate", "os.chmod", "os.chown", "os.utime", "shutil.rmtree"}
_TWO_PATHS = {"os.rename", "os.link", "os.symlink", "shutil.copyfile"}  # os.replace is "os.rename"


_METADATA = {"os.chmod", "os.chown", "os.utime"}


def _audit_hook(folder: str, metadata_only: bool = False) -> None:
    root = os.path.realpath(folder)
    null = {os.devnull, os.path.realpath(os.devnull)}

    def outside(path) -> bool:
        if not isinstance(path, (str, bytes, os.PathLike)):
            return False  # a file descriptor: it was opened under these rules
        resolved = os.path.realpath(os.fsdecode(path))
        if resolved in null:
            return False
        try:
            return os.path.commonpath([root, resolved]) != root
        except ValueError:  # another drive (Windows)
            return True

    def hook(event: str, args: tuple) -> None:
        if metadata_only and event not in _METADATA:
            return
        if event == "open" and len(args) == 3:
            path, mode, flags = args
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            paths = (path,) if writes else ()
        elif event in _ONE_PATH:
            paths = args[:1]
        elif event in _TWO_PATHS:
            paths = args[:2]
        else:
            return
        for path in paths:
            if outside(path):
                raise PermissionError(f"the verifier's worker may write only in its own folder, not {os.fsdecode(path)!r}")

    sys.addaudithook(hook)


# ---------------------------------------------------------------------------
# Hard limits and capabilities.


def hard_limits(memory_extra: int, file_bytes: int, processes: int, root_outside: bool) -> List[str]:
    """Cap the address space at what is mapped now plus `memory_extra`, the
    size of any file written, the number of processes and core dumps, with
    the hard limit equal to the soft one: nothing started after this can
    raise them (seccomp refuses even a privileged process). `root_outside`:
    the user who started it all is root, whose processes the kernel does not
    count (a sandbox's user namespaces hide that from inside). Returns what
    was set."""
    try:
        import resource
    except ImportError:  # not on this platform
        return []
    wanted = {"address space": (resource.RLIMIT_AS, _mapped() + memory_extra)}
    wanted["file size"] = (resource.RLIMIT_FSIZE, file_bytes)
    wanted["core dumps"] = (resource.RLIMIT_CORE, 0)
    if hasattr(resource, "RLIMIT_NPROC") and not root_outside:
        # Counted per user: on top of what this user already runs here. The
        # kernel does not count root's processes (sandbox.ProcessCap does).
        wanted["processes"] = (resource.RLIMIT_NPROC, _processes_of_this_user() + processes)
    done = []
    for name, (which, value) in wanted.items():
        try:
            _, hard = resource.getrlimit(which)
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(which, (value, value))
            done.append(name)
        except (ValueError, OSError):
            pass
    return done


def cpu_limit(seconds: float) -> None:
    """A reproduction's own CPU time, hard: SIGXCPU, then SIGKILL a second later."""
    try:
        import resource

        soft = max(1, int(seconds + 0.999))
        resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))
    except (ImportError, ValueError, OSError):
        pass


def _mapped() -> int:
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _processes_of_this_user() -> int:
    uid, count = os.getuid(), 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    for entry in entries:
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry}/task"))
            except OSError:
                pass
    return count


_PR_CAPBSET_DROP = 24
_PR_SET_SECUREBITS = 28
# SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP and SECBIT_KEEP_CAPS_LOCKED, each with its lock.
_SECUREBITS = 0b1_0111_1
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def drop_capabilities() -> bool:
    """Give up every capability for good, root included (no regaining them
    by exec): a root worker then cannot raise its limits, read another
    process's descriptors or change files it does not own. Linux only."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return False
    for capability in range(64):
        libc.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)
    libc.prctl(_PR_SET_SECUREBITS, _SECUREBITS, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable; twice: all zero
    return libc.capset(ctypes.byref(header), ctypes.byref(data)) == 0


# ---------------------------------------------------------------------------
# Seccomp, through libseccomp.

_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_CMP_NE, _CMP_MASKED_EQ = 1, 7

# Refused with EPERM: changing files' metadata (what namespaces and Landlock
# leave open), reading or writing other processes, leaving the process
# group, raising limits, new namespaces and mounts, the kernel's
# administration, asynchronous I/O that seccomp cannot see, and sockets
# (a reproduction needs no network).
REFUSED_CALLS = (
    "chmod fchmod fchmodat fchmodat2 chown fchown lchown fchownat "
    "utime utimes utimensat futimesat "
    "setxattr lsetxattr fsetxattr setxattrat removexattr lremovexattr fremovexattr removexattrat "
    "ptrace process_vm_readv process_vm_writev pidfd_getfd kcmp "
    "setsid setpgid setrlimit "
    "unshare setns mount umount2 pivot_root chroot move_mount open_tree fsopen fsmount fsconfig fspick "
    "mknod mknodat swapon swapoff reboot kexec_load kexec_file_load init_module finit_module delete_module "
    "bpf perf_event_open userfaultfd keyctl add_key request_key acct quotactl "
    "name_to_handle_at open_by_handle_at settimeofday clock_settime clock_adjtime adjtimex "
    "sethostname setdomainname syslog iopl ioperm vhangup "
    "io_uring_setup io_uring_enter io_uring_register "
    "socket"
).split()
_NEW_NAMESPACES = (0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000, 0x00000080)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


class Seccomp:
    """The filter, built once in the worker and loaded by each reproduction's
    process before the user's code runs (it then holds for everything that
    process starts). `None` from `build()` where libseccomp is missing."""

    def __init__(self, lib, ctx) -> None:
        self._lib, self._ctx = lib, ctx

    @classmethod
    def build(cls) -> Optional["Seccomp"]:
        if not sys.platform.startswith("linux"):
            return None
        try:
            lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
        except OSError:
            return None
        lib.seccomp_init.restype = ctypes.c_void_p
        lib.seccomp_init.argtypes = [ctypes.c_uint32]
        lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp)]
        lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
        lib.seccomp_load.argtypes = [ctypes.c_void_p]
        ctx = lib.seccomp_init(_ALLOW)
        if not ctx:
            return None
        refuse = _ERRNO | errno.EPERM

        def add(name: str, action: int, *comparisons: _ArgCmp) -> None:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:
                return  # not a system call on this architecture or libseccomp version
            array = (_ArgCmp * len(comparisons))(*comparisons) if comparisons else None
            if lib.seccomp_rule_add_array(ctx, action, number, len(comparisons), array) != 0:
                raise OSError(f"seccomp: cannot add a rule for {name}")

        try:
            for name in REFUSED_CALLS:
                add(name, refuse)
            # prlimit64 may read limits (getrlimit uses it), never set them.
            add("prlimit64", refuse, _ArgCmp(2, _CMP_NE, 0, 0))
            for flag in _NEW_NAMESPACES:
                add("clone", refuse, _ArgCmp(0, _CMP_MASKED_EQ, flag, flag))
            # clone3's flags sit behind a pointer seccomp cannot read: ENOSYS
            # makes the C library fall back to clone, which is checked.
            add("clone3", _ERRNO | errno.ENOSYS)
        except OSError:
            return None
        return cls(lib, ctx)

    def load(self) -> bool:
        """Load the filter into this process (and what it starts from now on)."""
        return self._lib.seccomp_load(self._ctx) == 0
