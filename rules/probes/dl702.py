"""The probe of DL702 (a deprecated `Variable(...)` that changes nothing).

The `Variable(...)` probe DL701 and DL702 share, in the runtime: the call on
the finding's line watched as it runs (the tensor it wraps, the one it
returns, the warnings it gives, the grad mode at the line).
"""

from detachlint.verify.runtime.variable_probe import probe_variable_call


def probe(spec, budget):
    return probe_variable_call(spec, budget)
