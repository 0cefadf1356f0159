"""Make the verifier's worker folder the only place a reproduction can write.

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
"""

from __future__ import annotations

import ctypes
import os
import sys

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
