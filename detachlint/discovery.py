"""Which files to lint.

Folders are walked for `*.py` files and notebooks (`*.ipynb`) in sorted order, skipping excluded
names (default: virtualenvs, build output, caches, VCS folders) and never
following symlinked folders, so a symlink loop cannot trap the walk. A file
named on the command line is always linted, unless a pattern the user wrote
in `exclude`/`extend-exclude` matches it (what pre-commit needs).
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Sequence, Tuple

from detachlint.config import Config


@dataclass(frozen=True)
class Target:
    display: str  # as the user will read it: relative stays relative
    path: Path


def matches(patterns: Sequence[str], path: Path, root: Path, ancestors: bool = True) -> bool:
    """Whether `path` matches a pattern, or (with `ancestors`) a folder above
    it inside the root does. A pattern without a slash names a file or folder
    anywhere (`legacy`, `legacy/`, `*_pb2.py`); one with a slash is a path
    from the root (`src/legacy`, `tests/data/*`). The walk checks each entry
    as it descends, so it needs no ancestors."""
    try:
        parts = path.resolve().relative_to(root).parts
    except ValueError:
        # Outside the root only the file itself can match: the folders above
        # it are not the project's to name (a `build` in /builds/...).
        names, paths = [path.name], [path.as_posix()]
    else:
        keep = len(parts) if ancestors else 1
        names = list(parts[-keep:])
        paths = ["/".join(parts[: i + 1]) for i in range(len(parts) - keep, len(parts))]
    for pattern in patterns:
        pattern = pattern.rstrip("/")
        while pattern.startswith("./"):
            pattern = pattern[2:]
        if not pattern:
            continue
        candidates = paths if "/" in pattern else names
        if any(fnmatch.fnmatchcase(candidate, pattern) for candidate in candidates):
            return True
    return False


def discover(paths: Sequence[str], config: Config) -> Tuple[List[Target], List[str]]:
    """Files to lint and one error line for each path that cannot be read."""
    targets: List[Target] = []
    errors: List[str] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            targets.extend(_walk(given, path, config, errors))
        elif path.exists() or path.is_symlink():
            if not path.exists():
                errors.append(f"{given}: broken symlink")
            elif not matches(config.user_exclude, path, config.root):
                targets.append(Target(given, path))
        else:
            errors.append(f"{given}: no such file or directory")
    seen = set()
    unique = []
    for target in targets:
        key = os.path.normcase(os.path.abspath(target.path))
        if key not in seen:
            seen.add(key)
            unique.append(target)
    return unique, errors


def _walk(given: str, folder: Path, config: Config, errors: List[str]) -> Iterator[Target]:
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except OSError as error:
        errors.append(f"{folder}: cannot read folder: {error.strerror or error}")
        return
    for entry in entries:
        path = Path(entry.path)
        if matches(config.exclude, path, config.root, ancestors=False):
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                yield from _walk(given, path, config, errors)
            elif entry.name.endswith((".py", ".ipynb")) and entry.is_file():
                display = os.path.normpath(os.path.join(given, os.path.relpath(entry.path, given)))
                yield Target(display, path)
        except OSError as error:
            errors.append(f"{path}: {error.strerror or error}")
