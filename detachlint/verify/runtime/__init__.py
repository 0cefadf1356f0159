"""The verifier's runtime: rebuild a finding's code, feed it, watch the hazard.

A reproduction (`spec`) carries the user's own code as blocks of source with
their original line numbers. The runtime executes them in a fresh module,
builds what the code needs and runs it while the rule's probe watches. It
is split by job, each module building on the ones before it:

- `standins`: stand-ins for what the reproduction cannot have (models,
  loggers, loaders, config objects, missing imports) and the naming words
  that pick them;
- `synthesis`: input synthesis (`Synth`, `Plan`, `Spec`) and the readers of
  how the user's function uses a name;
- `observe`: watching backward, reading values around the finding's
  statement, describing errors, recording what was stood in;
- `user_code`: rebuilding the user's module, choosing an entry point, the
  attempts under different plans (`find_working`);
- `shared_probes`: the probes several rules share;
- `variable_probe`: the probe of `torch.autograd.Variable(...)` calls, which
  DL701 and DL702 share;
- `verdict`: `run(spec, budget)`, which runs the rule's probe and attaches
  the verdict's basis.

Each rule's own probe lives beside the rule, in the built-in rules'
`probes/` folder (`rules/probes/dl101.py`); the files there are the one list
of probed rules. Standard library and torch only: the worker imports the
runtime once, and `--emit-repro` copies the parts the probes need into
one module beside the scripts. This file itself never imports torch, so the
linter can ask which rules are probed without it.
"""

import re
from pathlib import Path

# A probe module is named after its rule: `dl101.py` probes DL101.
_PROBE_FILE = re.compile(r"[a-z]{1,6}[0-9]{2,4}")


def probe_folder() -> Path:
    """The built-in rules' `probes/` folder (inside the package once installed)."""
    package = Path(__file__).resolve().parent.parent.parent
    installed = package / "_builtin_rules" / "probes"
    return installed if installed.is_dir() else package.parent / "rules" / "probes"


def probe_files() -> dict:
    """Rule code -> its probe module's path, from the files that exist."""
    return {
        path.stem.upper(): path
        for path in sorted(probe_folder().glob("*.py"))
        if _PROBE_FILE.fullmatch(path.stem)
    }


def probed_codes() -> frozenset:
    """The rules whose findings a probe can check."""
    return frozenset(probe_files())
