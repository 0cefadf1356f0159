"""The verifier worker's write confinement, each mechanism in its own process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

PROBE = textwrap.dedent(
    """
    import json, os, subprocess, sys
    from detachlint.verify import confine

    box, outside, mechanism = sys.argv[1:]
    how = confine.confine_writes(box) if mechanism == "landlock" else (confine._audit_hook(box) or "audit hook")
    results = {"how": how}

    def attempt(name, action):
        try:
            action()
            results[name] = "allowed"
        except PermissionError:
            results[name] = "refused"

    attempt("write inside", lambda: open(os.path.join(box, "a.txt"), "w").write("x"))
    attempt("make a folder inside", lambda: os.mkdir(os.path.join(box, "sub")))
    attempt("write outside", lambda: open(os.path.join(outside, "new.txt"), "w").write("x"))
    attempt("append outside", lambda: open(os.path.join(outside, "keep.txt"), "a").write("x"))
    attempt("delete outside", lambda: os.remove(os.path.join(outside, "keep.txt")))
    attempt("move out", lambda: os.replace(os.path.join(box, "a.txt"), os.path.join(outside, "moved.txt")))
    attempt("make a folder outside", lambda: os.mkdir(os.path.join(outside, "sub")))
    attempt("read outside", lambda: open(os.path.join(outside, "keep.txt")).read())
    attempt("write to devnull", lambda: open(os.devnull, "w").write("x"))
    print(json.dumps(results))
    """
)


def _probe(tmp_path, mechanism):
    box, outside = tmp_path / "box", tmp_path / "user"
    box.mkdir()
    outside.mkdir()
    (outside / "keep.txt").write_text("the user's file")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.run(
        [sys.executable, "-c", PROBE, str(box), str(outside), mechanism],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout), box, outside


@pytest.mark.parametrize("mechanism", ["landlock", "audit hook"])
def test_writes_outside_the_folder_are_refused(tmp_path, mechanism):
    results, box, outside = _probe(tmp_path, mechanism)
    if results.pop("how") != mechanism:
        pytest.skip("this kernel has no Landlock")
    assert results == {
        "write inside": "allowed",
        "make a folder inside": "allowed",
        "write outside": "refused",
        "append outside": "refused",
        "delete outside": "refused",
        "move out": "refused",
        "make a folder outside": "refused",
        "read outside": "allowed",
        "write to devnull": "allowed",
    }
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]
    assert (outside / "keep.txt").read_text() == "the user's file"
    assert sorted(p.name for p in box.iterdir()) == ["a.txt", "sub"]
