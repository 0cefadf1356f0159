"""Names used as priors: what a name suggests about a value the analysis
cannot otherwise know. A prior may sharpen an unknown; it never overrides
what the code shows, and never alone makes or silences a finding.
"""

import re

from detachlint.analysis.vocabulary import (
    DETACHING_METHODS,
    MODULE_API,
    MODULE_RETURNING_SELF,
    NOT_TENSOR_METHODS,
    READING_METHODS,
    RESHAPING_METHODS,
    STORING_METHODS,
    TO_PYTHON_METHODS,
)

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

# `weight`, `bias`, `in_proj_weight`, `weight_ih_l0`, `q_bias`, `weight_orig`.
PARAMETER_ATTRIBUTE_NAME = re.compile(r"(?:\w+_)?(?:weight|bias)(?:_[a-z0-9]+)*")

# A function of the file that wraps code in a grad mode by its name.
NO_GRAD_WRAPPER_NAME = re.compile(r"no_grad|inference_mode|inference_context|disable_grad|grad_disabled", re.I)

# Parameters named like data a loss compares a prediction with.
DATA_NAME = re.compile(
    r"(?:\w+_)?(?:y|ys|y_true|target|targets|tgt|label|labels|lbl|gt|gts|ground_truth|truth|"
    r"reward|rewards|returns?|mask|masks|x|xs|inputs?|batch|data|images?|imgs?|samples?|"
    r"input_ids|tokens|ids)(?:_\w+)?",
    re.I,
)

# An untyped value named like a model, an optimizer.
MODEL_NAME = re.compile(
    r"(?:\w+_)?(?:model|net|network|encoder|decoder|generator|discriminator|critic|actor|"
    r"policy|backbone|classifier|teacher|student|unet|vae)"
    r"(?:_(?:ema|q|k|s|t|g|d|\d+|fp32|eval|copy|without_ddp))?|net[GD]|[GD]",
    re.I,
)

OPTIMIZER_NAME = re.compile(r"(?:\w+_)?(?:optimizer|optimiser|optim)(?:_\w+)?|opt_\w+|\w+_opt", re.I)

# A capitalised suffix names the criterion's job: `criterionGAN`, `criterionL1`, `criterionAT`.
CRITERION_NAME = re.compile(
    r"(?:\w+_)?(?:criterion|loss_fn|loss_func|loss_function|lossfn)(?:(?-i:[A-Z])[A-Za-z0-9]*)?", re.I
)

# Members whose names say they are updated without gradients on purpose.
FROZEN_BY_NAME = re.compile(r"(^|_)(teacher|target|tgt|ema|momentum|frozen|fixed|shadow)($|_)|_k$|_ema$", re.I)

# A helper whose name says it freezes what it is handed.
FREEZE_HELPER_NAME = re.compile(r"freeze|requires_grad", re.I)

# What a data-loading loop iterates over.
DATA_ITERABLE_NAME = re.compile(r"loader|dataset|data_?iter|epoch_iterator", re.I)

# Helpers that clear gradients: `zero_grad`, `zero_gradients`, `clear_grad`,
# `reset_grads`, `_foreach_zero_` over grads, `set_grads_to_none`.
ZEROING_NAME = re.compile(r"(zero|clear|reset)\w*grad|grads?_?(to_)?none|grad\w*(zero|clear|reset)", re.I)

# Words of a function's name that say it evaluates rather than trains.
EVAL_WORDS = {
    "eval", "evaluate", "evaluation", "evaluator", "validate", "validation", "val", "valid",
    "test", "testing", "predict", "prediction", "predictions", "infer", "inference",
}

# Test files and test classes: code that asserts, not code that trains.
TEST_FILE_NAME = re.compile(r"(^|/)(test_[^/]*|[^/]*_test|conftest)\.py$")

TEST_CLASS_NAME = re.compile(r"^Test|Tests?$|TestCase$")

# Networks that produce targets: DQN/DDPG target copies, teachers, EMA and momentum encoders.
TARGET_NETWORK_NAME = re.compile(
    r"(?:\w+_)?(?:target|tgt|teacher|ema|momentum)(?:_\w+)?|\w+_(?:targ|t)|(?:q|critic|actor|model|net)_?target\w*",
    re.I,
)

# Callables named like functions rather than networks.
NOT_NETWORK_NAME = re.compile(r"(?:\w+_)?(?:transform|fn|func|function|loss|criterion|encoder_fn|mask|sampler)", re.I)


def duck_typed(method: str, definers: list):
    """The one class of the file that defines `method`, for a call of it on an
    object the analysis cannot see (`self.env.log_probs(...)` where only
    `Env` defines `log_probs`): what the object most likely is. None when
    several classes or none define it, for dunders, and for names that
    torch's modules and tensors or Python's containers also have."""
    if len(definers) != 1 or method.startswith("__") or method in MODULE_API or method in STORING_METHODS or method in NOT_TENSOR_METHODS:
        return None
    if method in _COMMON_METHODS:
        return None
    return definers[0]


# Methods that many unrelated objects have: a call of one says nothing of the receiver's class.
_COMMON_METHODS = MODULE_RETURNING_SELF | READING_METHODS | RESHAPING_METHODS | TO_PYTHON_METHODS | DETACHING_METHODS | frozenset({
    "forward", "step", "update", "reset", "append", "extend", "run", "close", "save", "load", "sample", "log",
    "write", "read", "mean", "sum",
})
