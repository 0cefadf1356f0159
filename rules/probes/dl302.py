"""The probe of DL302 (`backward()` with autograd off).

The statement on the finding's line raises the RuntimeError the finding
names; refuted when it runs through.
"""

from detachlint.verify.runtime.shared_probes import raises_on_its_line

probe = raises_on_its_line("does not require grad")
