"""Names used as priors: what a name suggests about a value the analysis
cannot otherwise know. A prior may sharpen an unknown; it never overrides
what the code shows, and never alone makes or silences a finding.
"""

import re

# A function that is no method (a snippet cut out of its class, a method
# assigned to a class later) but whose first parameter is called `self` or
# `cls` is read as a method of some class: its first parameter the instance.
# A real method's instance is its first parameter, whatever it is called.
RECEIVER_NAMES = ("self", "cls")

# GAN roles, where the file does not say which optimizer steps which model:
# `netG`, `generator`, `G_AB`; `netD`, `disc`, `critic`; `optimizerD`,
# `d_opt`. Not `critic` for optimizers: in RL code a critic's optimizer steps
# a value network whose inputs rightly come from the actor.
GENERATOR_NAME = re.compile(r"(?:\w+_)?(?:generator|gen)(?:_\w+)?|net_?G\w*|G(?:_\w+)?", re.I)
DISCRIMINATOR_NAME = re.compile(r"(?:\w+_)?(?:discriminator|disc|critic)(?:_\w+)?|net_?D\w*|D(?:_\w+)?", re.I)
DISCRIMINATOR_OPTIMIZER_NAME = re.compile(
    r"(?:\w+_)?(?:d|dis|disc|discriminator|net_?d)_?(?:optim\w*|opt)|(?:optim\w*|opt)_?(?:d|dis|disc|discriminator|net_?d)",
    re.I,
)
