"""Run one reproduction: the rule's probe, then the verdict's basis.

`PROBES` maps a rule code to its probe: the `probe` function of each module
in the built-in rules' `probes/` folder (`dl101.py` probes DL101), loaded
once. `run(spec, budget)` looks the probe up and `run_probe` runs it and
attaches what the verdict rests on (`user-code`, `stand-in`):
only the user's own code can confirm or refute.
"""

import importlib.util
import sys

import torch

from detachlint.verify.runtime import probe_files
from detachlint.verify.runtime.standins import CONFIGS, Inconclusive
from detachlint.verify.runtime.observe import BASIS


def _load_probes():
    """Rule code -> probe function, one module per file in the probes folder."""
    probes = {}
    for code, path in probe_files().items():
        name = f"detachlint._loaded_probes.{path.stem}"
        module = sys.modules.get(name)
        if module is None:
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        probes[code] = module.probe
    return probes


PROBES = _load_probes()


def run(spec, budget=None):
    """Verify one finding: {"status": confirmed|refuted|inconclusive, "evidence": text}
    and, from probes that measure something drawable, "details"."""
    probe = PROBES.get(spec["code"])
    if probe is None:
        return {"status": "inconclusive", "evidence": f"no probe for {spec['code']}"}
    return run_probe(probe, spec, budget)


def run_probe(probe, spec, budget=None):
    """One probe on one spec, with the verdict's basis attached. A refutation
    through one of the file's calls stands only when every other call the
    file makes (all carried as alternatives) refutes it too."""
    result = _run_probe_once(probe, spec, budget)
    site = spec.get("call_site") or {}
    alternatives = site.get("alternatives") or []
    if not (result.get("demoted") == "call_site" and 0 < site["others"] == len(alternatives)):
        result.pop("demoted", None)
        return result
    for alternative in alternatives:
        blocks = [b for b in spec["blocks"] if not b.get("call_site")] + alternative["blocks"]
        chosen = {k: v for k, v in alternative.items() if k != "blocks"}
        again = _run_probe_once(probe, dict(spec, blocks=blocks, call_site=dict(chosen, others=0)), budget)
        if again["status"] != "refuted" or not BASIS["call_site"]:
            result.pop("demoted", None)
            return result  # that call may show it: the first run's inconclusive stands
    lines = ", ".join(str(a["line"]) for a in alternatives)
    evidence = result["evidence"].rsplit(" (with the arguments of the call on line", 1)[0]
    return dict(result, status="refuted", evidence=f"{evidence} (with the arguments of each of the file's calls: lines {site['line']}, {lines})")


def _run_probe_once(probe, spec, budget=None):
    if spec.get("reason"):
        return {"status": "inconclusive", "evidence": spec["reason"]}
    grad_mode = torch.is_grad_enabled()
    details = None
    BASIS.update(stand_ins=[], replaced=[], call_site=False, caller=None, untouched=None)
    try:
        status, evidence, *rest = probe(spec, budget)
        details = rest[0] if rest else None
    except Inconclusive as reason:
        status, evidence = "inconclusive", str(reason)
    except RecursionError:
        status, evidence = "inconclusive", "the reproduction recursed too deep"
    except MemoryError:
        status, evidence = "inconclusive", "the reproduction ran out of memory"
    finally:
        torch.set_grad_enabled(grad_mode)
    # Other findings' same-line fixes the code ran with (the client's `other_fixes`).
    evidence += spec.get("other_fixes") or ""
    return _with_basis({"status": status, "evidence": evidence}, details, spec)


def _with_basis(result, details, spec):
    """Only the user's own code can confirm or refute: a hazard shown on a
    stand-in is `plausible`, and a run on stand-ins that did not show it
    rules nothing out."""
    if details is not None:
        result["details"] = details
    if result["status"] == "inconclusive":
        return result
    stand_ins = BASIS["stand_ins"]
    if BASIS["untouched"] and result["status"] == "confirmed":
        # The observed value came from none of the replaced parts: only a
        # forced branch or a made-up value would still weigh on it.
        stand_ins = [part for part in stand_ins if part not in BASIS["replaced"]]
        if BASIS["replaced"] and not stand_ins:
            result["evidence"] += f"; {BASIS['untouched']}"
    if stand_ins:
        result["basis"] = "stand-in"
    else:
        result["basis"] = "user-code"
    if result["basis"] != "user-code":
        if result["status"] == "confirmed":
            result["status"] = "plausible"
        elif result["status"] == "refuted":
            result["status"] = "inconclusive"
            result["evidence"] += "; a run on stand-ins cannot rule the finding out"
    made_up = [name for config in CONFIGS for name in config.read()]
    if result["status"] == "refuted" and made_up:
        # The configuration decided which path ran (loop counts, flags):
        # other values may take the one the finding is about.
        result["status"] = "inconclusive"
        names = ", ".join(f"`{name}`" for name in list(dict.fromkeys(made_up))[:4])
        result["evidence"] += f"; with made-up configuration values ({names}) this rules nothing out"
    site = spec.get("call_site")
    if result["status"] == "refuted" and BASIS["call_site"] and site and site["others"]:
        # One call's arguments did not show it; the file's other calls may.
        result["status"] = "inconclusive"
        result["demoted"] = "call_site"
        result["evidence"] += f" (with the arguments of the call on line {site['line']}; the file calls it {site['others']} more time(s))"
    calls = spec.get("hints", {}).get("target_calls", 0)
    if result["status"] == "refuted" and BASIS.get("caller") and calls > 1:
        # Run through one method that calls it; the file's other calls may show it.
        result["status"] = "inconclusive"
        result["evidence"] += f" (run through `{BASIS['caller']}`, which calls it; the file calls it {calls - 1} more time(s))"
    return result


def verdict_line(result):
    """`confirmed (user-code): evidence`, the line an emitted script prints."""
    basis = f" ({result['basis']})" if result.get("basis") else ""
    return f"{result['status']}{basis}: {result['evidence']}"
