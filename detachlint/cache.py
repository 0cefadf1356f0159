"""Per-file results kept between runs, so an unchanged file is not parsed again.

An entry is keyed by the file's bytes, the path it is reported under, the
rules that run on it, what the run's other files say of its functions'
callers (`analysis/project.py`; the entry keeps the file's own summary for
them) and a fingerprint of detachlint's own code and rule
files (so editing a rule, or upgrading, starts afresh). Entries are written
through a temporary file and an atomic rename, so processes sharing the
folder never see half an entry; an entry that does not load is ignored and
rewritten.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Iterable, List, Optional, Sequence, Tuple

from detachlint import __version__
from detachlint.analysis.project import Summary
from detachlint.finding import Finding

CACHE_DIR_NAME = ".detachlint_cache"


def fingerprint(files: Iterable[Path]) -> str:
    digest = hashlib.sha256(__version__.encode())
    for path in sorted(files):
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(str(path).encode())
    return digest.hexdigest()


class Cache:
    def __init__(self, folder: Path, code_fingerprint: str) -> None:
        self.folder = folder / __version__
        self.code_fingerprint = code_fingerprint

    def key(self, source: bytes, display: str, codes: Sequence[str]) -> str:
        digest = hashlib.sha256(self.code_fingerprint.encode())
        digest.update(display.encode("utf-8", "surrogateescape") + b"\0")
        digest.update(",".join(codes).encode() + b"\0")
        digest.update(source)
        return digest.hexdigest()

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def load(self, key: str) -> Optional[Tuple[List[Finding], List[str], Optional[Summary]]]:
        """Findings, errors and, for a file linted in a run of several, what it
        tells the others."""
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            summary = Summary.from_json(data["summary"]) if data.get("summary") is not None else None
            return [Finding.from_json(f) for f in data["findings"]], list(data["errors"]), summary
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None  # missing or damaged: lint again and rewrite

    def store(self, key: str, findings: Sequence[Finding], errors: Sequence[str], summary: Optional[Summary] = None) -> None:
        if errors:
            return  # an internal error is not a result worth keeping
        target = self._path(key)
        data = json.dumps(
            {
                "findings": [f.to_json() for f in findings],
                "errors": list(errors),
                "summary": summary.to_json() if summary is not None else None,
            }
        )
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            self._mark(self.folder.parent)
            handle, temporary = tempfile.mkstemp(dir=target.parent, suffix=".tmp")
            with os.fdopen(handle, "w", encoding="utf-8") as out:
                out.write(data)
            os.replace(temporary, target)
        except OSError:
            pass  # a read-only or full disk only costs speed

    @staticmethod
    def _mark(folder: Path) -> None:
        ignore = folder / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# Created by detachlint\n*\n")
            (folder / "CACHEDIR.TAG").write_text(
                "Signature: 8a477f597d28d172789f06886806bc55\n# detachlint's cache; safe to delete\n"
            )
