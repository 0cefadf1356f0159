"""Stand-ins for what a reproduction cannot have, and the words that pick them.

A reproduction carries only the user's own definitions. What the file gets
from elsewhere (a missing import, a model passed in, a logger, a config
object, a data loader) is replaced here by something small that lets the
code reach the line under test: `Missing` for names that could not be
defined, `StandIn` for models, `Sink` for loggers, `Loader` for batches.
Which one a parameter gets depends on its name (`n_actions`, `loader`), so
the naming words live here too, with the outcomes every part of the runtime
raises (`Inconclusive`, `Enough`) and the tensors the verifier made itself.

Part of the verifier's runtime: standard library and torch only, so the
worker can import it and `--emit-repro` can copy it into a script.
"""

import ast
import contextlib
import os
import random
import re
import sys
import types

import torch
import torch.nn.functional as F
from torch import nn


def walk(node):
    """The nodes `ast.walk` yields, in its order (breadth first, a node's
    children queued before it is yielded), without its nested generators
    and skipping the fields that hold names and numbers: the runtime walks
    the user's code many times per reproduction."""
    nodes, index = [node], 0
    child_fields = _CHILD_FIELDS
    while index < len(nodes):
        current = nodes[index]
        index += 1
        kind = type(current)
        fields = child_fields.get(kind)
        if fields is None:
            fields = child_fields[kind] = _child_fields(kind)
        for field in fields:
            value = getattr(current, field, None)
            if type(value) is list:
                nodes.extend([item for item in value if isinstance(item, ast.AST)])
            elif isinstance(value, ast.AST):
                nodes.append(value)
        yield current


_CHILD_FIELDS = {}
# Fields that hold an identifier, a number or a flag, never a node.
_SCALAR_FIELDS = {"id", "attr", "arg", "name", "module", "level", "type_comment", "kind", "is_async", "conversion", "simple"}


def _child_fields(kind):
    scalar = set(_SCALAR_FIELDS)
    if kind in (ast.Global, ast.Nonlocal):
        scalar.add("names")  # identifiers (`Import.names` holds `alias` nodes)
    if kind is ast.Constant:
        scalar.add("value")
    return tuple(field for field in kind._fields if field not in scalar)


def parse_at(text, line):
    """`ast.parse(text)` with line numbers as in the file, where `text`
    starts on `line`: parsed after blank lines rather than renumbered after
    (a walk over every node). A syntax error reads as it does unshifted."""
    try:
        return ast.parse("\n" * (line - 1) + text)
    except SyntaxError:
        pass
    tree = ast.parse(text)
    ast.increment_lineno(tree, line - 1)
    return tree



BATCH = 2


SEQ = 8  # time steps of synthesized sequences


FEATURES = 8  # features of an input no layer tells the size of


IMAGE = 16  # side of an image fed to a stand-in model


STANDIN_WIDTH = 64


class Inconclusive(Exception):
    """The probe could not decide; the message is the reason."""


class ResourceLimit(Inconclusive):
    """The reproduction ran out of memory: no other plan, no fallback."""


_MEMORY_ERRORS = ("can't allocate memory", "not enough memory", "DefaultCPUAllocator", "out of memory")


def is_memory_error(error):
    return isinstance(error, MemoryError) or (
        isinstance(error, RuntimeError) and any(text in str(error) for text in _MEMORY_ERRORS)
    )


class Enough(BaseException):
    """Raised by an observer once the probe has seen enough. A BaseException,
    so the user's `except Exception:` cannot swallow it."""


# ---------------------------------------------------------------------------
# Names: what a parameter called `n_actions` or `loader` probably holds.


def name_tokens(name):
    return [t for t in re.split(r"[_\d]+", name.lower()) if t]


_MODEL_WORDS = {
    "model", "net", "network", "module", "encoder", "decoder", "backbone", "classifier", "autoencoder",
    "generator", "discriminator", "critic", "actor", "policy", "teacher", "student", "netg", "netd",
    "ae", "vae", "gan", "transformer", "cnn", "rnn", "lstm", "gru", "mlp", "head", "qnet", "agent",
}


_SIZE_NAMES = {"d_model", "model_dim", "dim_model", "d_ff", "n_embd", "d_hidden"}


_SIZE_WORDS = {
    "dim", "dims", "size", "channels", "channel", "ch", "chans", "features", "feature", "hidden", "width",
    "d", "emb", "embed", "embedding", "units", "nhid", "ninp", "latent", "z", "planes", "inplanes",
    "filters", "neurons", "c", "depth_dim", "in", "out", "input", "output",
}


_COUNT_WORDS = {
    "classes", "class", "labels", "actions", "answers", "tags", "outputs", "targets", "categories",
    "experts", "cls", "species", "types", "nclass", "nclasses", "numclasses",
}


_VOCAB_WORDS = {"vocab", "ntoken", "ntokens", "tokens", "embeddings", "words", "vocabulary", "chars"}


LABEL_WORDS = {"y", "label", "labels", "target", "targets", "gt", "cls", "classes", "answer", "answers", "truth"}


MASK_WORDS = {"mask", "masks", "legal", "valid", "keep", "allowed", "padding", "visible"}


TOKEN_WORDS = {
    "tokens", "token", "ids", "input_ids", "src", "tgt", "question", "questions", "text", "words",
    "sentence", "sentences", "seq", "sequence", "captions", "caption", "indices",
}


IMAGE_WORDS = {"image", "images", "img", "imgs", "pixel", "pixels", "frames", "frame", "photo", "photos", "board", "boards"}


CONFIG_NAMES = {
    "config", "cfg", "args", "hparams", "hp", "options", "conf", "settings", "params", "hyperparams", "opts", "opt",
    "flags", "cmdl", "hps", "cmd_args", "cli_args",
}


SINK_WORDS = {"writer", "logger", "tb", "wandb", "log", "summary", "tensorboard", "progress", "pbar", "callback", "callbacks", "accelerator", "scaler"}


def is_model_name(name):
    lowered = name.lower()
    if lowered in _SIZE_NAMES:
        return False
    tokens = set(name_tokens(name))
    return bool(tokens & _MODEL_WORDS) or lowered.endswith("net") or lowered in ("g", "d", "m", "f")


def number_for(name, as_config=False):
    """A small value a constructor argument or config field called `name` can take."""
    lowered = name.lower()
    tokens = set(name_tokens(name))
    if lowered in _SIZE_NAMES:
        return 16
    if tokens & {"eps", "epsilon"}:
        return 1e-5
    if tokens & {"dropout", "drop", "prob", "rate", "p"} and not tokens & {"num", "n"}:
        return 0.0
    if tokens & {"act", "activation", "nonlinearity"}:
        return "gelu"
    if as_config and tokens & {"cuda", "gpu", "gpus", "distributed", "fp16", "amp", "half", "parallel", "debug", "verbose", "dry", "resume"}:
        return False  # the reproduction runs on one CPU, once
    if tokens & {"use", "is", "has", "return", "output", "add", "enable", "bias"} and lowered.split("_")[0] in (
        "use", "is", "has", "return", "output", "add", "enable",
    ):
        return False
    if tokens & _VOCAB_WORDS:
        return 32
    if tokens & {"heads", "nhead", "head", "nheads"}:
        return 2
    if tokens & {"layers", "depth", "blocks", "nlayers", "stages", "levels"}:
        return 1
    if tokens & {"kernel", "ksize", "k"}:
        return 3
    if tokens & {"stride", "dilation", "groups"}:
        return 1
    if tokens & {"padding", "pad"}:
        return 1 if "kernel" not in tokens else 0
    if tokens & _COUNT_WORDS:
        return 4
    if "type" in tokens or "mode" in tokens or "name" in tokens:
        return None if as_config else "default"
    if tokens & {"temperature", "scale", "alpha", "beta", "gamma", "tau", "margin", "std", "lr", "momentum", "decay", "weight"}:
        return 0.1
    return 16


# ---------------------------------------------------------------------------
# Stand-ins for what the reproduction cannot have.


class Passthrough:
    """`tqdm(loader)` when tqdm is not installed: the loader itself."""

    def __init__(self, factory=None):
        self.factory = factory

    def __call__(self, *args, **kwargs):
        if self.factory is not None:
            return self.factory(*args)
        return args[0] if args else Sink()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self


class Missing:
    """Stands in for a name whose import failed (not installed, a relative
    import of the user's package) or whose module-level definition is script
    code the verifier does not run. It absorbs attribute access, calls,
    indexing and iteration so the code can reach the line under test; any
    real use of it as a number or tensor fails, and the reproduction is then
    inconclusive."""

    def __init__(self, name, reason, used):
        object.__setattr__(self, "_dl_name", name)
        object.__setattr__(self, "_dl_reason", reason)
        object.__setattr__(self, "_dl_used", used)

    def _dl_touch(self, name):
        self._dl_used.setdefault(self._dl_name.split(".")[0].split("(")[0], self._dl_reason)
        return Missing(name, self._dl_reason, self._dl_used)

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return self._dl_touch(f"{self._dl_name}.{attr}")

    def __setattr__(self, attr, value):
        self._dl_touch(self._dl_name)

    def __call__(self, *args, **kwargs):
        return self._dl_touch(f"{self._dl_name}()")

    def __getitem__(self, key):
        return self._dl_touch(f"{self._dl_name}[]")

    def __setitem__(self, key, value):
        self._dl_touch(self._dl_name)

    def __iter__(self):
        # `a, b, c = missing()`: as many items as the unpacking asks for
        # (read off the caller's bytecode), two for a plain loop.
        count = _unpack_count(sys._getframe(1)) or 2
        return iter([self._dl_touch(self._dl_name) for _ in range(count)])

    def __enter__(self):
        return self._dl_touch(self._dl_name)

    def __exit__(self, *exc):
        return False

    def __bool__(self):
        return False

    def __repr__(self):
        return f"<missing {self._dl_name}>"

    def __mro_entries__(self, bases):
        # A class on a missing base is still defined (on `object`): its own
        # methods may be all the reproduction needs.
        self._dl_touch(self._dl_name)
        return ()


# The record of missing names the reproduction running now keeps (its
# `UserModule.used_missing`): stub modules outlive one attempt's module.
USED_NOW = [None]


class _UsedNow:
    def setdefault(self, key, value):
        used = USED_NOW[0]
        return used.setdefault(key, value) if used is not None else value


class StubModule(types.ModuleType):
    """A package the project's own modules import that is not installed
    (`import torchvision.utils as vutils` in `models/train.py`): the module
    imports, and each name read from it is `Missing`, recorded when used."""

    def __init__(self, name, reason):
        super().__init__(name)
        self.__path__ = []
        self._dl_reason = reason

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Missing(f"{self.__name__}.{attr}", self._dl_reason, _UsedNow())


class _StubFinder:
    """Finds the stubbed packages (and their submodules) for `import`."""

    def __init__(self):
        self.packages = {}  # top-level name -> reason

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] not in self.packages:
            return None
        import importlib.util

        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return StubModule(spec.name, self.packages[spec.name.split(".")[0]])

    def exec_module(self, module):
        pass


STUBS = _StubFinder()


def exec_stubbing(code, ns, statements, roots):
    """`exec(code, ns)`; when a project module the block imports (under
    `roots`) fails on a package that is not installed, that package is
    stubbed (`StubModule`) and the block runs again, so the module's own code
    is there. A package the block imports itself stays missing, as before.
    Returns the project modules imported with stubs (to forget afterwards)."""
    direct = set()
    for statement in statements:
        if isinstance(statement, ast.Import):
            direct |= {alias.name.split(".")[0] for alias in statement.names}
        elif isinstance(statement, ast.ImportFrom) and not statement.level and statement.module:
            direct.add(statement.module.split(".")[0])
    stubbed = []
    while True:
        try:
            exec(code, ns)
            break
        except ModuleNotFoundError as error:
            top = (error.name or "").split(".")[0]
            imports_only = statements and all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in statements)
            if not top or top in direct or top in STUBS.packages or len(stubbed) >= 4 or not imports_only or any(
                os.path.exists(os.path.join(root, top)) or os.path.exists(os.path.join(root, top + ".py")) for root in roots
            ):
                raise
            if not _raised_in(error, roots):
                raise  # an installed library's own dependency: not the project's code
            if STUBS not in sys.meta_path:
                sys.meta_path.append(STUBS)
            STUBS.packages[top] = f"is not installed (the project's own modules import `{top}`)"
            stubbed.append(top)
    if not stubbed:
        return []
    return [
        name for name, module in list(sys.modules.items())
        if isinstance(module, StubModule) or any((getattr(module, "__file__", None) or "").startswith(root + os.sep) for root in roots)
    ]


def _raised_in(error, roots):
    """Whether the import that failed is written in a file under `roots`."""
    last, tb = None, error.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not filename.startswith("<frozen"):
            last = filename
        tb = tb.tb_next
    return last is not None and any(last.startswith(root + os.sep) for root in roots)


def forget_stubs(modules):
    """Drop the stubs and the project modules imported with them."""
    for name in modules:
        sys.modules.pop(name, None)
    STUBS.packages.clear()
    if STUBS in sys.meta_path:
        sys.meta_path.remove(STUBS)


def _unpack_count(frame):
    """n when the frame is executing `UNPACK_SEQUENCE n`, else None."""
    try:
        import dis

        for instruction in dis.get_instructions(frame.f_code):
            if instruction.offset == frame.f_lasti:
                return instruction.arg if instruction.opname == "UNPACK_SEQUENCE" else None
    except Exception:
        return None
    return None


class StandIn(nn.Module):
    """A model for a parameter the file gives no module class for: flattens
    its first tensor argument, pads or cuts it to a fixed width, and applies
    one linear layer. Unknown attributes become further stand-ins, so
    `model.encoder(x)` and `model.classifier(h)` work too."""

    _NOT_CHILDREN = {"module", "config", "generate", "loss", "training", "device", "dtype"}

    def __init__(self, out_features=4):
        super().__init__()
        self.fc = nn.Linear(STANDIN_WIDTH, out_features)
        self.dl_out = out_features

    @property
    def device(self):
        return torch.device("cpu")

    @property
    def dtype(self):
        return torch.float32

    def forward(self, *args, **kwargs):
        x = _first_tensor(list(args) + list(kwargs.values()))
        if x is None:
            x = torch.zeros(BATCH, STANDIN_WIDTH)
        x = x.float()
        if x.dim() == 0:
            x = x.reshape(1, 1)
        x = x.reshape(x.shape[0], -1) if x.dim() > 1 else x.reshape(-1, 1)
        width = x.shape[1]
        x = F.pad(x, (0, STANDIN_WIDTH - width)) if width < STANDIN_WIDTH else x[:, :STANDIN_WIDTH]
        return self.fc(x)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("_") or name in self._NOT_CHILDREN or name.startswith("dl_"):
                raise
            child = StandIn(self.__dict__.get("dl_out", 4))
            # Not add_module: its hasattr() check would come back here.
            self._modules[name] = child
            return child


class StandInLoss(nn.Module):
    """A criterion: the mean square of the prediction (the target only has to
    exist). Given a model's output it is a pure function of it, so no grad
    comes from nowhere; given only raw inputs the verifier made (a loss
    closure that owns its parameters), it brings a parameter of its own.
    `outputs` > 1 returns that many terms, for `total, parts = loss_fn(...)`."""

    def __init__(self, outputs=1, name=None, record=None):
        super().__init__()
        self.dl_outputs = outputs
        self.weight = nn.Parameter(torch.ones(()))
        # Once called, it ran in place of the program's loss: `record` gets `name`.
        self.dl_name, self.dl_record = name, record

    def forward(self, *args, **kwargs):
        if self.dl_record is not None and self.dl_name not in self.dl_record:
            self.dl_record.append(self.dl_name)
        prediction = _first_tensor(list(args) + list(kwargs.values()))
        if prediction is None:
            loss = self.weight * 1.0
        else:
            loss = prediction.float().pow(2).mean()
            if is_synthesized(prediction):
                loss = loss * self.weight
        return tuple(loss * (i + 1) for i in range(self.dl_outputs)) if self.dl_outputs > 1 else loss


# The config objects the attempt running now made up (reset with SYNTHESIZED).
CONFIGS = []


_SECTION_WORDS = {"specs", "spec", "config", "cfg", "params", "options", "settings", "opts", "kwargs", "hparams", "section"}


class AutoConfig:
    """A config object (`args`, `opt`, `cmdl`). Fields the program gives a
    value (`known`: the argument defaults of the file's parser) have it; any
    other field is a small value chosen from its name, made up, and
    `read()` lists those, since they may decide which path ran. `strict`: the
    config stands for a script variable, so a made-up field is a stand-in."""

    def __init__(self, name=None, known=None, source=None, strict=False, guesses=None):
        object.__setattr__(self, "_values", {})
        object.__setattr__(self, "_dl_guesses", guesses or {})  # field -> a value the code compares it with
        object.__setattr__(self, "_dl_name", name)
        object.__setattr__(self, "_dl_known", dict(known or {}))
        object.__setattr__(self, "_dl_source", source)
        object.__setattr__(self, "_dl_strict", strict)
        object.__setattr__(self, "_dl_used", [])  # known fields the code read
        object.__setattr__(self, "_dl_made", [])  # made-up fields the code read
        CONFIGS.append(self)

    def read(self):
        """The made-up fields the code read, with the values it was given."""
        values = object.__getattribute__(self, "_values")
        return {k: values[k] for k in object.__getattribute__(self, "_dl_made")}

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        values = object.__getattribute__(self, "_values")
        known = object.__getattribute__(self, "_dl_known")
        if name not in values and name in known:
            object.__getattribute__(self, "_dl_used").append(name)
            values[name] = known[name]
        if name not in values:
            object.__getattribute__(self, "_dl_made").append(name)
            # A section of the config (`config["data_specs"]["width"]`) is a config too.
            nested = set(name_tokens(name)) & _SECTION_WORDS
            guesses = object.__getattribute__(self, "_dl_guesses")
            if nested:
                values[name] = AutoConfig(name, strict=self._dl_strict, guesses=guesses)
            else:
                values[name] = guesses[name] if name in guesses else number_for(name, as_config=True)
        return values[name]

    def __setattr__(self, name, value):
        # Set by the code itself (`args.device = ...`): the program's value.
        self._values[name] = value

    def __getitem__(self, name):
        return getattr(self, name)

    def __contains__(self, name):
        return True

    def __iter__(self):
        # A walk over the fields sees the program's own; made-up ones cannot be listed.
        if not self._dl_known:
            raise TypeError("a made-up config object is not iterable")
        return iter(list(self._dl_known))

    def get(self, name, default=None):
        if name in self._values:
            return self._values[name]
        return self._dl_known.get(name, default)


def config_notes():
    """(inputs, stand_ins): what the evidence says about the config objects the
    run read. The program's own values are inputs; made-up fields of a config
    standing for a script variable are stand-ins; those of an argument are
    named too (and `verdict` weighs them)."""
    inputs, stand_ins = [], []
    for config in CONFIGS:
        name = config._dl_name or "config"
        used = list(dict.fromkeys(config._dl_used))
        if used and config._dl_source:
            fields = ", ".join(f"`{name}.{f}`" for f in used[:4]) + (" ..." if len(used) > 4 else "")
            inputs.append(f"{fields} from {config._dl_source}")
        made_up = [f for f, v in config.read().items() if not isinstance(v, AutoConfig)]
        if made_up:
            text = "made-up values for " + ", ".join(f"`{name}.{f}`" for f in made_up[:4]) + (" ..." if len(made_up) > 4 else "")
            (stand_ins if config._dl_strict else inputs).append(text)
    return inputs, stand_ins


class Sink:
    """A logger, writer or callback: accepts every call and does nothing."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __call__(self, *args, **kwargs):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __iter__(self):
        return iter(())


class Scaler(Sink):
    """An AMP GradScaler, disabled: `scale(loss)` is the loss itself and
    `step(optimizer)` steps the optimizer, so the backward after it runs."""

    def scale(self, value):
        return value

    def step(self, optimizer, *args, **kwargs):
        return optimizer.step(*args, **kwargs)


class Loader(list):
    """A few batches; `len(loader.dataset)` and `loader.batch_size` work."""

    def __init__(self, batches):
        super().__init__(batches)
        self.dataset = list(range(BATCH * len(batches)))
        self.batch_size = BATCH


def _first_tensor(values):
    for value in values:
        if isinstance(value, torch.Tensor):
            return value
        if isinstance(value, (list, tuple)):
            found = _first_tensor(value)
            if found is not None:
                return found
        if isinstance(value, dict):
            found = _first_tensor(list(value.values()))
            if found is not None:
                return found
    return None


def tensors_in(value, depth=0):
    """Every tensor in an output: tuples, lists, dicts, dataclass-like objects."""
    if isinstance(value, torch.Tensor):
        return [value]
    if depth > 4 or value is None or isinstance(value, (str, bytes, int, float, bool)):
        return []
    if isinstance(value, dict):
        items = list(value.values())
    elif isinstance(value, (list, tuple, set)):
        items = list(value)
    elif hasattr(value, "__dict__") and not isinstance(value, (nn.Module, types.ModuleType, type)):
        items = list(vars(value).values())
    else:
        return []
    found = []
    for item in items:
        found.extend(tensors_in(item, depth + 1))
    return found


_LEGACY_TYPES = (
    "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor", "LongTensor", "IntTensor",
    "ShortTensor", "CharTensor", "ByteTensor", "BoolTensor",
)


@contextlib.contextmanager
def cpu_only():
    """`.cuda()` and `.to("cuda")` stay on the CPU: reproductions run there."""

    def _cpu(value):
        if isinstance(value, torch.device) and value.type != "cpu":
            return torch.device("cpu")
        if isinstance(value, str) and value.split(":")[0] in ("cuda", "mps", "xpu"):
            return "cpu"
        if isinstance(value, int) and not isinstance(value, bool):
            return "cpu"
        return value

    tensor_to, module_to = torch.Tensor.to, nn.Module.to
    saved = {
        (torch.Tensor, "cuda"): torch.Tensor.cuda,
        (nn.Module, "cuda"): nn.Module.cuda,
        (torch.Tensor, "to"): tensor_to,
        (nn.Module, "to"): module_to,
        (torch.Tensor, "pin_memory"): torch.Tensor.pin_memory,
    }

    def tensor_to_cpu(self, *args, **kwargs):
        moved = [_cpu(a) if not isinstance(a, torch.Tensor) and not isinstance(a, torch.dtype) else a for a in args]
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        # A move to another device is a copy in autograd's eyes (a non-leaf
        # with a ToCopyBackward node), so it stays one here.
        if any(a is not b for a, b in zip(moved, args)) or kwargs.get("device") == "cpu":
            kwargs["copy"] = True
        return tensor_to(self, *moved, **kwargs)

    def tensor_cuda(self, *args, **kwargs):
        return tensor_to(self, "cpu", copy=True)

    def module_to_cpu(self, *args, **kwargs):
        args = [_cpu(a) if not isinstance(a, torch.Tensor) and not isinstance(a, torch.dtype) else a for a in args]
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        return module_to(self, *args, **kwargs)

    # The legacy CUDA tensor types (`torch.cuda.FloatTensor(n, 1)`,
    # `x.type(torch.cuda.LongTensor)`) make and convert to their CPU types.
    for name in _LEGACY_TYPES:
        if hasattr(torch.cuda, name) and hasattr(torch, name):
            saved[(torch.cuda, name)] = getattr(torch.cuda, name)
            setattr(torch.cuda, name, getattr(torch, name))
    torch.Tensor.cuda = tensor_cuda
    nn.Module.cuda = lambda self, *a, **k: self
    torch.Tensor.to = tensor_to_cpu
    nn.Module.to = module_to_cpu
    torch.Tensor.pin_memory = lambda self, *a, **k: self
    try:
        yield
    finally:
        for (owner, name), value in saved.items():
            setattr(owner, name, value)


def seed_everything(seed=0):
    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except Exception:
        pass


# Inputs the verifier made (a StandInLoss tells them from model outputs), by id.
SYNTHESIZED = {}


# Inputs the attempt running now has made, counted as they are made (the
# weak references in SYNTHESIZED may be gone by the time anyone asks).
MADE = [0]


# Summed over the attempts so far: the inputs made when the user's code
# started to run, all `inputs_requiring_grad` could have flipped then (a
# probe reads how much it grew over its runs).
MADE_AT_ENTRY = [0]


def is_synthesized(tensor):
    ref = SYNTHESIZED.get(id(tensor))
    return ref is not None and ref() is tensor
