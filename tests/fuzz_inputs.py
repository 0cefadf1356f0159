"""Hostile variations of real inputs, for the fuzz tests and `bench/fuzz.py`.

Each mutation takes source bytes and a seeded `random.Random` and returns
new bytes: truncation, random byte edits, deep nesting, very long lines,
tabs, CRLF, a BOM, and re-encoding under a coding cookie.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Callable, Iterator, List, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent


def seeds() -> List[bytes]:
    """Every fixture and every rule example: realistic torch code to start from."""
    from detachlint.registry import load_rules

    found = [p.read_bytes() for p in sorted((ROOT / "fixtures").rglob("*.py"))]
    for rule in load_rules().values():
        for kind in ("valid", "invalid"):
            for example in rule.examples(kind):
                found.append(example.source.encode("utf-8"))
    return found


def truncate(source: bytes, rng: random.Random) -> bytes:
    return source[: rng.randrange(len(source) + 1)]


def byte_edits(source: bytes, rng: random.Random) -> bytes:
    data = bytearray(source)
    for _ in range(rng.randint(1, 8)):
        choice = rng.random()
        at = rng.randrange(len(data) + 1)
        if choice < 0.4 and data:
            data[min(at, len(data) - 1)] = rng.randrange(256)
        elif choice < 0.7:
            data[at:at] = bytes([rng.choice(b"()[]{}:.,=+-*/\\'\"#\n\t @!`;x0_")])
        elif data:
            del data[min(at, len(data) - 1)]
    return bytes(data)


def token_edits(source: bytes, rng: random.Random) -> bytes:
    """Swap, drop or duplicate whole lines: still mostly Python."""
    lines = source.split(b"\n")
    for _ in range(rng.randint(1, 4)):
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        action = rng.random()
        if action < 0.33:
            lines[i], lines[j] = lines[j], lines[i]
        elif action < 0.66 and len(lines) > 1:
            del lines[i]
        else:
            lines.insert(i, lines[j])
    return b"\n".join(lines)


def deep_nesting(source: bytes, rng: random.Random) -> bytes:
    depth = rng.choice([50, 200, 1000, 5000])
    shapes = [
        b"(" * depth + b"x" + b")" * depth,
        b"[" * depth + b"]" * depth,
        b"x" + b" + x" * (depth * 4),
        b"-" * depth + b"x",
        b"f(" * depth + b")" * depth,
        b"x" + b".y" * depth,
        b"a if b else " * depth + b"c",
    ]
    statement = b"value = " + rng.choice(shapes) + b"\n"
    nested_blocks = b"".join(b"    " * i + b"if x:\n" for i in range(min(depth, 100))) + b"    " * min(depth, 100) + b"pass\n"
    return source + b"\n" + rng.choice([statement, nested_blocks])


def long_line(source: bytes, rng: random.Random) -> bytes:
    width = rng.choice([10_000, 100_000, 1_000_000])
    return source + b"\nx = '" + b"a" * width + b"'\ny = torch.zeros(" + b"1, " * min(width // 10, 3000) + b"1)\n"


def tabs(source: bytes, rng: random.Random) -> bytes:
    return source.replace(b"    ", b"\t")


def mixed_tabs(source: bytes, rng: random.Random) -> bytes:
    lines = source.split(b"\n")
    return b"\n".join(line.replace(b"    ", b"\t", 1) if rng.random() < 0.3 else line for line in lines)


def crlf(source: bytes, rng: random.Random) -> bytes:
    return source.replace(b"\n", b"\r\n") if rng.random() < 0.7 else source.replace(b"\n", b"\r")


def bom(source: bytes, rng: random.Random) -> bytes:
    return b"\xef\xbb\xbf" + source


def encoded(source: bytes, rng: random.Random) -> bytes:
    """Re-encode with a coding cookie, sometimes a wrong or unknown one."""
    text = source.decode("utf-8", "replace") + "\nname = 'caf\u00e9 \u00fc\u00df'\n"
    encoding = rng.choice(["latin-1", "cp1252", "utf-16", "shift_jis", "koi8-r", "utf-8"])
    cookie = rng.choice([encoding, encoding, "utf-8", "no-such-codec"])
    header = f"# -*- coding: {cookie} -*-\n"
    try:
        return (header + text).encode(encoding, "replace")
    except (UnicodeError, LookupError):
        return (header + text).encode("utf-8")


def nul_and_controls(source: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(source) + 1)
    return source[:at] + rng.choice([b"\x00", b"\x0c", b"\x1b", b"\xff\xfe", b"\x85", "\u2028".encode("utf-8")]) + source[at:]


MUTATIONS: Sequence[Callable[[bytes, random.Random], bytes]] = (
    truncate, byte_edits, token_edits, deep_nesting, long_line, tabs, mixed_tabs, crlf, bom, encoded, nul_and_controls,
)


def mutants(count: int, seed: int = 0) -> Iterator[Tuple[str, bytes]]:
    """`count` mutated inputs, reproducibly: (a label, the bytes)."""
    rng = random.Random(seed)
    base = seeds()
    for i in range(count):
        source = rng.choice(base)
        applied = []
        for _ in range(rng.choice([1, 1, 2, 3])):
            mutation = rng.choice(MUTATIONS)
            source = mutation(source, rng)
            applied.append(mutation.__name__)
        if b"torch" not in source and rng.random() < 0.8:
            source = b"import torch\n" + source  # get past the prefilter most of the time
        yield f"#{i} {'+'.join(applied)}", source


def check_one(source: bytes, rules) -> None:
    """The properties every input must keep; raises AssertionError otherwise."""
    from detachlint.engine import PARSE_ERROR_CODE, lint_source
    from detachlint.fixer import fix_source
    from detachlint.engine import parse
    from detachlint.report import FORMATS, ReportContext

    result = lint_source(source, "fuzz.py", rules)
    assert not result.errors, result.errors  # an internal error is a bug
    parse_errors = [f for f in result.findings if f.code == PARSE_ERROR_CODE]
    assert not parse_errors or len(result.findings) == 1
    for finding in result.findings:
        assert finding.line >= 1 and finding.column >= 1
    json.loads(FORMATS["json"](result.findings, ReportContext()))
    if result.findings and not parse_errors:
        fixed = fix_source(source, "fuzz.py", rules, True)
        if fixed.applied:
            module, error = parse(fixed.source, "fuzz.py")
            assert error is None, f"a fix produced unparsable code: {error.message}"
