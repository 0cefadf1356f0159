"""Each probed rule's probe for `--verify`, one module per rule (`dl101.py`).

A module here defines `probe(spec, budget)`, which runs the reproduction
with the helpers of `detachlint.verify.runtime` and returns `(status,
evidence)` or `(status, evidence, details)`, or raises `Inconclusive` with
the reason. The files in this folder are the list of probed rules: adding
one makes `--verify` run it, and its rule's `## Verification` docs must say
what it observes. Torch and the runtime only: `--emit-repro` copies the
module into a standalone script.
"""
