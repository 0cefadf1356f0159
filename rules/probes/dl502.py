"""The probe of DL502 (in-place edit of a leaf parameter).

The statement on the finding's line raises the RuntimeError the finding
names; refuted when it runs through.
"""

from detachlint.verify.runtime.shared_probes import raises_on_its_line

probe = raises_on_its_line("a leaf Variable that requires grad is being used in an in-place operation")
