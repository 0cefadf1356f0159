"""`--emit-repro`: each reproduction as a standalone script.

The script is the verifier's runtime (`probes.py`, standard library and
torch only) followed by the reproduction's spec, the user's code in it as
readable blocks. `python script.py` rebuilds and runs it in a temporary
folder and prints the same verdict line the report shows.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import List

from detachlint import __version__

_PROBES = Path(__file__).with_name("probes.py")


def _runtime() -> str:
    """probes.py without its module docstring (the script has its own)."""
    text = _PROBES.read_text(encoding="utf-8")
    tree = ast.parse(text)
    first = tree.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        text = "".join(text.splitlines(keepends=True)[first.end_lineno :])
    return text.lstrip("\n")


def _string(text: str) -> str:
    """A readable literal: a raw triple-quoted string when that is exact, else repr."""
    if "'''" not in text and not text.endswith("\\") and "\r" not in text:
        return "r'''" + text + "'''"
    return repr(text)


def _value(value, indent: str = "") -> str:
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = indent + "    "
        items = [f"{inner}{_value(k)}: {_value(v, inner)}," for k, v in value.items()]
        return "{\n" + "\n".join(items) + f"\n{indent}}}"
    if isinstance(value, list):
        if not value:
            return "[]"
        inner = indent + "    "
        return "[\n" + "\n".join(f"{inner}{_value(v, inner)}," for v in value) + f"\n{indent}]"
    if isinstance(value, str) and "\n" in value:
        return _string(value)
    return repr(value)


def script(spec: dict) -> str:
    """The text of a standalone reproduction script for one spec."""
    where = f"{spec['path']}:{spec['line']}:{spec['column']}"
    header = (
        "#!/usr/bin/env python3\n"
        f'r"""detachlint {__version__}: reproduction of {spec["code"]} at {where}.\n\n'
        f"{_wrap(spec['message'])}\n\n"
        "Run it with plain `python` (it needs only torch): it rebuilds the code in\n"
        f"SPEC['blocks'] (copied from {spec['path']}, with their line numbers), runs\n"
        "it on synthesized inputs in a temporary folder and prints the verdict.\n"
        "Nothing else from the original file runs. Below SPEC is detachlint's\n"
        "verifier runtime, which builds the inputs and watches for the hazard.\n"
        "Exit status: 1 confirmed, 0 refuted, 2 otherwise (plausible, inconclusive).\n"
        '"""\n\n'
        "SPEC = " + _value(spec) + "\n\n"
    )
    footer = (
        "\n\n"
        'if __name__ == "__main__":\n'
        "    import os\n"
        "    import tempfile\n\n"
        "    torch.set_num_threads(1)\n"
        "    with tempfile.TemporaryDirectory() as scratch:\n"
        "        os.chdir(scratch)\n"
        "        result = run(SPEC)\n"
        '    print(f"{result[\'status\']}: {result[\'evidence\']}")\n'
        "    raise SystemExit({'confirmed': 1, 'refuted': 0}.get(result['status'], 2))\n"
    )
    return header + _runtime() + footer


def _wrap(text: str, width: int = 76) -> str:
    words, lines, line = text.replace('"""', "'''").split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return "\n".join(lines)


def file_name(spec: dict, taken: List[str]) -> str:
    """`pos_bce_prob_clamp_L30_DL101.py`, unique within one run."""
    stem = re.sub(r"[^A-Za-z0-9_]+", "_", Path(spec["path"]).stem).strip("_") or "stdin"
    name = f"{stem}_L{spec['line']}_{spec['code']}.py"
    count = 2
    while name in taken:
        name = f"{stem}_L{spec['line']}_{spec['code']}_{count}.py"
        count += 1
    taken.append(name)
    return name
