"""The probe of DL504 (`requires_grad` set on a non-leaf).

The statement on the finding's line raises the RuntimeError the finding
names; refuted when it runs through.
"""

from detachlint.verify.runtime.shared_probes import raises_on_its_line

probe = raises_on_its_line("you can only change requires_grad flags of leaf variables")
