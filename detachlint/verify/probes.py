"""The verifier's runtime: rebuild a finding's code, feed it, watch the hazard.

A reproduction (`spec`) carries the user's own code as blocks of source with
their original line numbers: the file's imports, the enclosing function or
class and the module-level definitions it uses. `run(spec)` executes those
blocks in a fresh module (of the file's top-level script code, only the
straight-line statements extract.py cut for a finding there, as one function), builds the
objects the code needs (its own module classes, with constructor arguments
from a call found in the file or guessed from parameter names; inputs shaped
after the first layers; small loaders, optimizers and losses), runs the
enclosing function and lets the rule's probe watch: which parameters got no
gradient, which tensors autograd saved, what raised on which line.

Standalone on purpose (standard library and torch only): the worker imports
it once, and `--emit-repro` copies this file verbatim into every reproduction
script, so a user can run one with plain `python`.
"""

import ast
import builtins
import collections
import contextlib
import inspect
import math
import random
import re
import sys
import textwrap
import time
import warnings
import types
import weakref

import torch
import torch.nn.functional as F
from torch import nn

BATCH = 2
SEQ = 8  # time steps of synthesized sequences
FEATURES = 8  # features of an input no layer tells the size of
IMAGE = 16  # side of an image fed to a stand-in model
STANDIN_WIDTH = 64
MAX_ATTEMPTS = 8
ANNOTATIONS = __import__("__future__").annotations.compiler_flag


class Inconclusive(Exception):
    """The probe could not decide; the message is the reason."""


class ResourceLimit(Inconclusive):
    """The reproduction ran out of memory: no other plan, no fallback."""


_MEMORY_ERRORS = ("can't allocate memory", "not enough memory", "DefaultCPUAllocator", "out of memory")


def _is_memory_error(error):
    return isinstance(error, MemoryError) or (
        isinstance(error, RuntimeError) and any(text in str(error) for text in _MEMORY_ERRORS)
    )


class Enough(BaseException):
    """Raised by an observer once the probe has seen enough. A BaseException,
    so the user's `except Exception:` cannot swallow it."""


# ---------------------------------------------------------------------------
# Names: what a parameter called `n_actions` or `loader` probably holds.


def _tokens(name):
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
_LABEL_WORDS = {"y", "label", "labels", "target", "targets", "gt", "cls", "classes", "answer", "answers", "truth"}
_MASK_WORDS = {"mask", "masks", "legal", "valid", "keep", "allowed", "padding", "visible"}
_TOKEN_WORDS = {
    "tokens", "token", "ids", "input_ids", "src", "tgt", "question", "questions", "text", "words",
    "sentence", "sentences", "seq", "sequence", "captions", "caption", "indices",
}
_IMAGE_WORDS = {"image", "images", "img", "imgs", "pixel", "pixels", "frames", "frame", "photo", "photos", "board", "boards"}
_CONFIG_NAMES = {"config", "cfg", "args", "hparams", "hp", "options", "conf", "settings", "params", "hyperparams", "opts", "opt"}
_SINK_WORDS = {"writer", "logger", "tb", "wandb", "log", "summary", "tensorboard", "progress", "pbar", "callback", "callbacks", "accelerator", "scaler"}


def _is_model_name(name):
    lowered = name.lower()
    if lowered in _SIZE_NAMES:
        return False
    tokens = set(_tokens(name))
    return bool(tokens & _MODEL_WORDS) or lowered.endswith("net") or lowered in ("g", "d", "m", "f")


def number_for(name, as_config=False):
    """A small value a constructor argument or config field called `name` can take."""
    lowered = name.lower()
    tokens = set(_tokens(name))
    if lowered in _SIZE_NAMES:
        return 16
    if tokens & {"eps", "epsilon"}:
        return 1e-5
    if tokens & {"dropout", "drop", "prob", "rate", "p"} and not tokens & {"num", "n"}:
        return 0.0
    if tokens & {"act", "activation", "nonlinearity"}:
        return "gelu"
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

    def __init__(self, outputs=1):
        super().__init__()
        self.dl_outputs = outputs
        self.weight = nn.Parameter(torch.ones(()))

    def forward(self, *args, **kwargs):
        prediction = _first_tensor(list(args) + list(kwargs.values()))
        if prediction is None:
            loss = self.weight * 1.0
        else:
            loss = prediction.float().pow(2).mean()
            if _is_synthesized(prediction):
                loss = loss * self.weight
        return tuple(loss * (i + 1) for i in range(self.dl_outputs)) if self.dl_outputs > 1 else loss


class AutoConfig:
    """A config object: every field a small value chosen from its name."""

    def __init__(self):
        object.__setattr__(self, "_values", {})

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        values = object.__getattribute__(self, "_values")
        if name not in values:
            values[name] = number_for(name, as_config=True)
        return values[name]

    def __setattr__(self, name, value):
        self._values[name] = value

    def __getitem__(self, name):
        return getattr(self, name)

    def __contains__(self, name):
        return True

    def get(self, name, default=None):
        return self._values.get(name, default)


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


# ---------------------------------------------------------------------------
# The user's code: blocks in, a fresh module out.

_COUNTER = [0]


def _bound_names(statement):
    names = []
    for node in ast.walk(statement) if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else [statement]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, ast.alias):
            names.append((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)
    return names


SCRIPT_FUNCTION = "__detachlint_script__"
CALL_SITE_FUNCTION = "__detachlint_call_site__"


def parse_blocks(spec):
    """[(block, [statements with original line numbers])]; the blocks marked
    `script` (straight-line top-level code) become one function's body, and
    those marked `call_site` another that ends by making the file's own call."""
    parsed, script, site = [], [], []
    for block in spec["blocks"]:
        tree = ast.parse(textwrap.dedent(block["text"]))
        ast.increment_lineno(tree, block["line"] - 1)
        if block.get("script"):
            script.extend(tree.body)
        elif block.get("call_site"):
            site.extend(tree.body)
        else:
            parsed.append((block, tree.body))
    if script:
        parsed.append(_as_function(SCRIPT_FUNCTION, script))
    if spec.get("call_site"):
        call = ast.parse(spec["call_site"]["call"], mode="eval").body
        ast.increment_lineno(call, spec["call_site"]["line"] - 1)
        returned = ast.copy_location(ast.Return(call), call)
        parsed.append(_as_function(CALL_SITE_FUNCTION, site + [returned]))
    return parsed


def _as_function(name, body):
    function = ast.FunctionDef(
        name=name, args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]),
        body=body, decorator_list=[], returns=None, type_comment=None, type_params=[],
    )
    ast.copy_location(function, body[0])
    function.end_lineno = body[-1].end_lineno
    return {"line": body[0].lineno, "text": "", "script": True}, [ast.fix_missing_locations(function)]


class UserModule:
    """The reproduction's module: the blocks executed one by one. A block
    that fails (an import that is not installed, a class whose base is
    missing) leaves its names bound to `Missing`, and the others go on."""

    def __init__(self, spec, transform=None):
        self.spec = spec
        self.path = spec["path"]
        self.used_missing = {}
        self.failed = {}
        self.forced = []  # lines of `if`s a transform forced
        self.blocks = parse_blocks(spec)
        if transform is not None:
            transform(self)
        _COUNTER[0] += 1
        self.name = f"detachlint_repro_{_COUNTER[0]}"
        self.module = types.ModuleType(self.name)
        self.module.__file__ = self.path
        self.ns = self.module.__dict__
        sys.modules[self.name] = self.module
        for block, statements in self.blocks:
            code = compile(ast.Module(body=statements, type_ignores=[]), self.path, "exec", flags=ANNOTATIONS, dont_inherit=True)
            try:
                exec(code, self.ns)
            except Exception as error:  # noqa: BLE001 - any failure only makes names missing
                reason = _missing_reason(block, error)
                for name in _bound_names_of(statements):
                    self.failed[name] = reason
                    self.ns[name] = Missing(name, reason, self.used_missing)
        for name, reason in spec.get("unavailable", {}).items():
            self.ns.setdefault(name, Missing(name, reason, self.used_missing))
        for name in ("tqdm", "trange", "track"):
            if isinstance(self.ns.get(name), Missing):
                # Progress bars only wrap what they are given.
                self.ns[name] = Passthrough(range if name == "trange" else None)

    def close(self):
        sys.modules.pop(self.name, None)

    def find_class(self, name):
        for _, statements in self.blocks:
            for statement in statements:
                if isinstance(statement, ast.ClassDef) and statement.name == name:
                    return statement
        return None

    def find_function(self, name, class_name=None):
        if class_name:
            owner = self.find_class(class_name)
            statements = owner.body if owner is not None else []
        else:
            statements = [s for _, body in self.blocks for s in body]
        for statement in statements:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name == name:
                return statement
        return None

    def class_ast_of(self, obj):
        """The class statement of an object's class when the user's file defines it."""
        for klass in type(obj).__mro__:
            if getattr(klass, "__module__", None) == self.name:
                node = self.find_class(klass.__name__)
                if node is not None:
                    return node
        return None

    def module_classes(self):
        """The file's nn.Module subclasses with a forward, in file order."""
        found = []
        for _, statements in self.blocks:
            for statement in statements:
                if isinstance(statement, ast.ClassDef):
                    value = self.ns.get(statement.name)
                    if isinstance(value, type) and issubclass(value, nn.Module) and "forward" in _methods(statement):
                        found.append(statement.name)
        return found


def _bound_names_of(statements):
    names = []
    for statement in statements:
        names.extend(_bound_names(statement))
    return names


def _missing_reason(block, error):
    if isinstance(error, ImportError):
        module = getattr(error, "name", None) or str(error)
        if block["text"].lstrip().startswith("from ."):
            return f"comes from a relative import the reproduction does not carry ({block['text'].strip().splitlines()[0]})"
        return f"could not be imported (`{module}` is not installed)"
    return f"could not be defined ({type(error).__name__}: {error})"


def _methods(class_node):
    return {s.name: s for s in class_node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}


# ---------------------------------------------------------------------------
# Reading the user's function: where a statement is, what flows where.

_BENIGN = {"to", "float", "double", "half", "long", "int", "cuda", "cpu", "contiguous", "type", "clone", "requires_grad_", "bool"}


def strip_benign(expr):
    while isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr in _BENIGN:
        expr = expr.func.value
    return expr


def body_fields(node):
    for field in ("body", "orelse", "finalbody"):
        value = getattr(node, field, None)
        if isinstance(value, list) and value and isinstance(value[0], ast.stmt):
            yield field, value
    for handler in getattr(node, "handlers", []) or []:
        yield "handler", handler.body
    for case in getattr(node, "cases", []) or []:
        yield "case", case.body


def locate(root, line):
    """(body list, index, statement, [(ancestor, field)]) of the innermost
    statement under `root` that spans `line`; None when none does."""
    path = []
    node = root
    found = None
    while True:
        deeper = None
        for field, body in body_fields(node):
            for index, statement in enumerate(body):
                start = min([statement.lineno] + [d.lineno for d in getattr(statement, "decorator_list", [])])
                if start <= line <= (statement.end_lineno or statement.lineno):
                    deeper = (body, index, statement, field)
                    break
            if deeper:
                break
        if deeper is None:
            return found
        body, index, statement, field = deeper
        path = path + [(node, field)]
        found = (body, index, statement, list(path))
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node is not root:
            # A nested definition: its body runs when something calls it.
            pass
        node = statement


def aliases_in(function):
    """name -> the expression last assigned to it (pairs of tuple assignments too)."""
    aliases = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if isinstance(target, ast.Name):
                aliases.setdefault(target.id, value)
            elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
                for t, v in zip(target.elts, value.elts):
                    if isinstance(t, ast.Name):
                        aliases.setdefault(t.id, v)
    return aliases


def is_value(expr, matches, aliases, depth=0):
    expr = strip_benign(expr)
    if matches(expr):
        return True
    if isinstance(expr, ast.Name) and expr.id in aliases and depth < 4:
        value = aliases[expr.id]
        if isinstance(value, ast.Name) and value.id == expr.id:
            return False
        return is_value(value, matches, aliases, depth + 1)
    return False


def name_matcher(name):
    return lambda e: isinstance(e, ast.Name) and e.id == name


def key_matcher(owner, key):
    """Matches `owner[key]` for a constant key: a dict key or a tuple index."""

    def matches(e):
        return (
            isinstance(e, ast.Subscript)
            and isinstance(e.value, ast.Name)
            and e.value.id == owner
            and isinstance(e.slice, ast.Constant)
            and e.slice.value == key
        )

    return matches


def attr_matcher(owner, attr):
    return lambda e: isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == owner and e.attr == attr


def calls_in_order(function):
    calls = [n for n in ast.walk(function) if isinstance(n, ast.Call)]
    return sorted(calls, key=lambda c: (c.lineno, c.col_offset))


def flows(function, matches):
    """(call, position) for each call whose positional argument is the value."""
    aliases = aliases_in(function)
    found = []
    for call in calls_in_order(function):
        for position, arg in enumerate(call.args):
            if not isinstance(arg, ast.Starred) and is_value(arg, matches, aliases):
                found.append((call, position))
    return found


def resolve(expr, env):
    """The object a `name.attr.attr` expression names, from `env`; None if unknown."""
    if isinstance(expr, ast.Name):
        return env.get(expr.id)
    if isinstance(expr, ast.Attribute):
        owner = resolve(expr.value, env)
        if owner is None:
            return None
        try:
            return getattr(owner, expr.attr)
        except Exception:
            return None
    return None


def usage_of(function, name):
    """How a function uses one of its parameters."""
    usage = {"call_unpacked": 0, "called": False, "iterated": False, "methods": set(), "keys": [], "indexes": 0, "unpacked": 0, "attrs": set()}
    for node in ast.walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
            usage["called"] = True
        elif (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == name
            and isinstance(node.targets[0], (ast.Tuple, ast.List))
        ):
            usage["called"] = True
            usage["call_unpacked"] = len(node.targets[0].elts)
        elif isinstance(node, (ast.For, ast.comprehension)) and _iterates(node.iter, name):
            usage["iterated"] = True
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == name:
            usage["attrs"].add(node.attr)
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == name:
            if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
                if node.slice.value not in usage["keys"]:
                    usage["keys"].append(node.slice.value)
            elif isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int):
                usage["indexes"] = max(usage["indexes"], node.slice.value + 1)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == name:
            for target in node.targets:
                if isinstance(target, (ast.Tuple, ast.List)):
                    usage["unpacked"] = len(target.elts)
    return usage


_INDEX_TAKERS = {"gather": 1, "index_select": 1, "scatter": 1, "scatter_add": 1, "take_along_dim": 0}


def shape_usage(function, name):
    """(dimensions the code reads of `name`, whether it indexes another tensor)."""
    dims, indexes = 0, False
    for node in ast.walk(function):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "shape"
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id == name
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, int)
        ):
            dims = max(dims, node.slice.value + 1)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            receiver = node.func.value
            if node.func.attr == "size" and isinstance(receiver, ast.Name) and receiver.id == name:
                if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, int):
                    dims = max(dims, node.args[0].value + 1)
            position = _INDEX_TAKERS.get(node.func.attr)
            if position is not None and len(node.args) > position:
                index = node.args[position]
                if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(index)):
                    indexes = True
    return dims, indexes


def _iterates(expr, name):
    while isinstance(expr, ast.Call) and expr.args and (
        (isinstance(expr.func, ast.Name) and expr.func.id in ("enumerate", "tqdm", "iter", "list"))
        or (isinstance(expr.func, ast.Attribute) and expr.func.attr in ("tqdm",))
    ):
        expr = expr.args[0]
    return isinstance(expr, ast.Name) and expr.id == name


def loop_targets(function, name):
    """The targets of `for ... in name` (through enumerate/tqdm)."""
    found = []
    for node in ast.walk(function):
        if isinstance(node, (ast.For, ast.comprehension)) and _iterates(node.iter, name):
            target = node.target
            iterable = node.iter
            if (
                isinstance(iterable, ast.Call)
                and isinstance(iterable.func, ast.Name)
                and iterable.func.id == "enumerate"
                and isinstance(target, ast.Tuple)
                and len(target.elts) == 2
            ):
                target = target.elts[1]
            found.append(target)
    return found


# ---------------------------------------------------------------------------
# Synthesis: arguments, instances, inputs.


class Plan:
    """One guess at what the code wants, varied between attempts."""

    def __init__(self, labels="long", out=4, tokens="seq", spatial=32, force=False, call_site=False):
        self.labels, self.out, self.tokens, self.spatial, self.force = labels, out, tokens, spatial, force
        self.call_site = call_site  # run the file's own call of the code instead of synthesizing its arguments

    def but(self, **changes):
        values = dict(labels=self.labels, out=self.out, tokens=self.tokens, spatial=self.spatial, force=self.force, call_site=self.call_site)
        values.update(changes)
        return Plan(**values)

    def describe(self):
        return f"labels={self.labels} out={self.out} tokens={self.tokens} spatial={self.spatial} force={self.force} call_site={self.call_site}"


class Spec:
    """What tensor to make: kind float/long/bool/lengths, a shape, an upper bound."""

    def __init__(self, kind, shape, high=2):
        self.kind, self.shape, self.high = kind, tuple(shape), high

    def _make(self):
        if self.kind == "long":
            return torch.randint(0, max(int(self.high), 1), self.shape)
        if self.kind == "bool":
            flat = torch.arange(int(torch.tensor(self.shape).prod().item()) if self.shape else 1) % 2 == 0
            return flat.reshape(self.shape)
        if self.kind == "lengths":
            return torch.full(self.shape, SEQ, dtype=torch.long)
        if self.kind == "labels_float":
            return torch.randint(0, 2, self.shape).float()
        return torch.randn(self.shape)

    def make(self):
        tensor = self._make()
        _SYNTHESIZED[id(tensor)] = weakref.ref(tensor)
        return tensor


# Inputs the verifier made (a StandInLoss tells them from model outputs), by id.
_SYNTHESIZED = {}


def _is_synthesized(tensor):
    ref = _SYNTHESIZED.get(id(tensor))
    return ref is not None and ref() is tensor


def leaf_spec(module, plan):
    """The input the first known layer of `module` takes."""
    b = BATCH
    s = plan.spatial
    for layer in module.modules():
        if isinstance(layer, (nn.Embedding, nn.EmbeddingBag)):
            shape = (b, SEQ) if plan.tokens == "seq" else (b,)
            return Spec("long", shape, layer.num_embeddings)
        if isinstance(layer, nn.Linear):
            return Spec("float", (b, layer.in_features))
        if isinstance(layer, nn.Bilinear):
            return Spec("float", (b, layer.in1_features))
        if isinstance(layer, (nn.Conv1d, nn.ConvTranspose1d)):
            return Spec("float", (b, layer.in_channels, max(s, 8)))
        if isinstance(layer, (nn.Conv2d, nn.ConvTranspose2d)):
            return Spec("float", (b, layer.in_channels, s, s))
        if isinstance(layer, (nn.Conv3d, nn.ConvTranspose3d)):
            return Spec("float", (b, layer.in_channels, 4, max(s // 2, 4), max(s // 2, 4)))
        if isinstance(layer, nn.RNNBase):
            shape = (b, SEQ, layer.input_size) if layer.batch_first else (SEQ, b, layer.input_size)
            return Spec("float", shape)
        if isinstance(layer, nn.LayerNorm):
            return Spec("float", (b, SEQ) + tuple(layer.normalized_shape))
        if isinstance(layer, nn.BatchNorm1d):
            return Spec("float", (b, layer.num_features))
        if isinstance(layer, (nn.BatchNorm2d, nn.InstanceNorm2d)):
            return Spec("float", (b, layer.num_features, s, s))
        if isinstance(layer, nn.GroupNorm):
            return Spec("float", (b, layer.num_channels, s, s))
        if isinstance(layer, nn.MultiheadAttention):
            shape = (b, SEQ, layer.embed_dim) if layer.batch_first else (SEQ, b, layer.embed_dim)
            return Spec("float", shape)
    return None


class Synth:
    """Builds everything one attempt needs, remembering what it stood in."""

    def __init__(self, user, plan, hints):
        self.user = user
        self.plan = plan
        self.hints = hints or {}
        self.stand_ins = []  # parameter names given a StandIn model
        self.globals_stood_in = []  # module-level script variables given stand-ins
        self.attributes_stood_in = []  # `self.x` the constructor left unset
        self.modules = {}  # display prefix -> module, for gradients
        self.ctor_args = {}
        self._generator = torch.Generator().manual_seed(1)
        self._building = set()  # classes being constructed: none is its own argument

    # -- models and instances ------------------------------------------------

    def model_for(self, name):
        """A model for a parameter called `name`: the file's own class when one fits."""
        ns = self.user.ns
        candidates = []
        bound = self.hints.get("param_classes", {}).get(name) or self.hints.get("var_classes", {}).get(name)
        if bound:
            candidates.append(bound)
        classes = self.user.module_classes()
        roots = [c for c in self.hints.get("root_classes", classes) if c in classes]
        candidates += [c for c in reversed(roots) if c not in candidates]
        for class_name in [c for c in candidates if c not in self._building][:3]:
            cls = ns.get(class_name)
            if isinstance(cls, type) and issubclass(cls, nn.Module):
                try:
                    return self.construct(cls)
                except Exception:
                    continue
        self.stand_ins.append(name)
        return StandIn(self.plan.out)

    def construct(self, cls):
        """An instance of a class of the file: a call found in the file first,
        then arguments guessed from the constructor's parameter names."""
        errors = []
        for source in self.hints.get("ctor_calls", {}).get(cls.__name__, []):
            try:
                instance = eval(compile(source, self.user.path, "eval"), self.user.ns)
                self._remember_ctor(cls, source)
                return instance
            except Exception as error:  # noqa: BLE001
                errors.append(error)
        try:
            init = cls.__init__
            signature = inspect.signature(init)
        except (TypeError, ValueError):
            return cls()
        init_ast = None
        node = self.user.find_class(cls.__name__)
        if node is not None:
            init_ast = _methods(node).get("__init__")
        self._building.add(cls.__name__)
        try:
            args, kwargs = self.arguments(signature, init_ast, {}, skip_self=True, constructor=True)
        finally:
            self._building.discard(cls.__name__)
        self.ctor_args[cls.__name__] = dict(kwargs, **{f"#{i}": a for i, a in enumerate(args)})
        return cls(*args, **kwargs)

    def _remember_ctor(self, cls, source):
        try:
            call = ast.parse(source, mode="eval").body
            self.ctor_args[cls.__name__] = {
                k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg
            }
        except Exception:
            pass

    # -- parameters ----------------------------------------------------------

    def arguments(self, signature, function_ast, env, skip_self, constructor=False):
        """Positional and keyword arguments for every parameter without a default
        (and for defaults that would leave the CPU or run for long)."""
        parameters = list(signature.parameters.values())
        if skip_self and parameters and parameters[0].name in ("self", "cls"):
            parameters = parameters[1:]
        values = {}
        order = sorted(parameters, key=lambda p: self._pass(p, function_ast))
        for parameter in order:
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                continue
            value = self.value_for(parameter, function_ast, dict(env, **values), constructor)
            if value is not _DEFAULT:
                values[parameter.name] = value
        args, kwargs = [], {}
        for parameter in parameters:
            if parameter.name not in values:
                continue
            if parameter.kind == parameter.KEYWORD_ONLY:
                kwargs[parameter.name] = values[parameter.name]
            else:
                kwargs[parameter.name] = values[parameter.name]
        # Positional-only parameters cannot be passed by keyword.
        for parameter in parameters:
            if parameter.kind == parameter.POSITIONAL_ONLY and parameter.name in kwargs:
                args.append(kwargs.pop(parameter.name))
        return args, kwargs

    def _pass(self, parameter, function_ast):
        role = self.role(parameter.name, function_ast)
        if role in ("optimizer", "scheduler", "criterion"):
            return 1
        if role in ("tensor", "loader", "batch", "labels", "mask", "lengths", "tokens"):
            return 2
        return 0

    def role(self, name, function_ast):
        lowered = name.lower()
        tokens = set(_tokens(name))
        usage = usage_of(function_ast, name) if function_ast is not None else None
        if lowered in ("device", "dev", "devices") or lowered.endswith("_device"):
            return "device"
        if "dtype" in tokens:
            return "dtype"
        if usage and not usage["called"] and usage["attrs"] & {"zero_grad", "param_groups"} and "step" in usage["attrs"]:
            return "optimizer"
        if usage and "param_groups" in usage["attrs"]:
            return "optimizer"
        if lowered in ("optimizer", "optim", "optimiser") or lowered.endswith("optimizer") or lowered.endswith("_optim"):
            return "optimizer"
        if "scheduler" in lowered or lowered in ("sched", "lr_sched"):
            return "scheduler"
        if lowered in ("criterion", "crit", "loss_fn", "loss_func", "lossfn", "loss_function", "criteria") or lowered.endswith("criterion") or lowered.endswith("_loss_fn"):
            return "criterion"
        if lowered in _CONFIG_NAMES and not (usage and usage["called"]):
            return "config"
        if tokens & _SINK_WORDS and not _is_model_name(name):
            return "sink"
        if usage and usage["attrs"] & {"append", "extend", "insert"}:
            return "list"
        if usage and usage["attrs"] & {"items", "update", "setdefault", "keys", "values"} and not usage["iterated"]:
            return "dict"
        if usage and usage["called"]:
            if "loss" in tokens or "metric" in tokens or "fn" in tokens or "func" in tokens:
                return "criterion"
            return "model"
        if _is_model_name(name):
            return "model"
        if usage and usage["attrs"] & {"parameters", "named_parameters", "eval", "train", "state_dict", "modules", "children"}:
            return "model"
        if "loader" in lowered or lowered in ("batches", "dataloader", "data_iter", "iterator"):
            return "loader"
        if usage and usage["iterated"]:
            return "loader"
        if usage and (usage["keys"] or usage["unpacked"] or usage["indexes"]) and not tokens & (_LABEL_WORDS | _MASK_WORDS):
            return "batch"
        if lowered in ("batch", "data", "sample", "inputs_targets", "minibatch"):
            return "batch"
        if tokens & {"epochs", "epoch", "steps", "step", "iters", "iterations", "iter", "max", "num", "n", "idx", "id", "index", "k", "topk", "size", "len", "length", "rank", "seed", "count", "every", "freq", "interval", "bos", "eos", "sos", "pad", "start", "end", "token"} and not tokens & (_TOKEN_WORDS - {"token"}):
            if not tokens & {"ids", "tokens"} or lowered.endswith("_id"):
                return "int"
        if tokens & {"lr", "eps", "alpha", "beta", "gamma", "tau", "temperature", "margin", "scale", "momentum", "decay", "std", "noise", "clip", "norm", "threshold", "lambda", "lam", "weight", "ratio", "p", "prob", "dropout"}:
            return "float"
        if tokens & {"path", "file", "filename", "dir", "folder", "prefix", "name", "root", "fname", "out", "output", "save", "ckpt", "checkpoint", "mode", "split", "phase", "tag", "title"}:
            return "str"
        if tokens & {"verbose", "debug", "use", "is", "flag", "train", "training", "eval", "plot", "show", "save", "return"} and lowered.split("_")[0] in ("verbose", "debug", "use", "is", "flag", "return", "show", "plot"):
            return "bool"
        if tokens & {"lengths", "lens", "length"} or lowered in ("lengths", "lens", "seq_lens", "seq_lengths", "x_lens"):
            return "lengths"
        if tokens & _LABEL_WORDS:
            return "labels"
        if tokens & _MASK_WORDS:
            return "mask"
        if lowered in _TOKEN_WORDS or tokens & {"ids", "tokens", "token"}:
            return "tokens"
        return "tensor"

    def value_for(self, parameter, function_ast, env, constructor):
        name = parameter.name
        has_default = parameter.default is not inspect.Parameter.empty
        role = self.role(name, function_ast)
        lowered = name.lower()
        if role == "device":
            return "cpu"
        if role == "dtype":
            return torch.float32
        if has_default:
            default = parameter.default
            if role == "int" and isinstance(default, int) and not isinstance(default, bool):
                tokens = set(_tokens(name))
                if tokens & {"epochs", "epoch"} and default > 1:
                    return 1
                if tokens & {"steps", "iters", "iterations"} and default > 3:
                    return 3
                if tokens & {"max", "len", "length"} and default > SEQ:
                    return SEQ
            return _DEFAULT
        if constructor and role in ("tensor", "int", "float", "labels", "mask", "tokens", "lengths", "str", "bool", "batch"):
            value = number_for(name)
            if role == "str":
                return "default"
            return value
        if role == "model":
            model = self.model_for(name)
            self.modules[name] = model
            return model
        if role == "optimizer":
            params = [p for m in self._all_modules(env) for p in m.parameters()]
            return torch.optim.SGD(params or [nn.Parameter(torch.zeros(1))], lr=1e-3)
        if role == "scheduler":
            return Sink()
        if role == "criterion":
            usage = usage_of(function_ast, name) if function_ast is not None else {"call_unpacked": 0}
            return StandInLoss(max(usage["call_unpacked"], 1))
        if role == "config":
            return AutoConfig()
        if role == "sink":
            return Scaler() if "scaler" in _tokens(name) else Sink()
        if role == "list":
            return []
        if role == "dict":
            return collections.defaultdict(list)
        if role == "int":
            tokens = set(_tokens(name))
            if tokens & {"eos", "end"}:
                return 2
            if tokens & {"bos", "sos", "start"}:
                return 1
            if tokens & {"pad", "seed", "rank", "idx", "index", "epoch"}:
                return 0
            if tokens & {"epochs", "k", "topk", "every", "freq", "interval"}:
                return 1
            if tokens & {"size", "batch"}:
                return BATCH
            if tokens & {"max", "len", "length"}:
                return SEQ
            return 2
        if role == "float":
            return 0.1
        if role == "str":
            return "detachlint_out"
        if role == "bool":
            return False
        if role == "loader":
            return self.loader(name, function_ast, env)
        if role == "batch":
            return self.batch_from_usage(name, function_ast, env)
        return self.tensor_for(name, function_ast, env, role).make()

    def _all_modules(self, env):
        found = []
        for value in env.values():
            if isinstance(value, nn.Module):
                found.append(value)
            elif not isinstance(value, (int, float, str, bool, type(None), torch.Tensor)) and hasattr(value, "__dict__"):
                found.extend(v for v in vars(value).values() if isinstance(v, nn.Module))
        return found

    # -- tensors -------------------------------------------------------------

    def tensor_for(self, name, function_ast, env, role=None, matches=None):
        """A tensor for a value: shaped after the layer it flows into, else by
        name; then as many dimensions as the code reads (`y.shape[1]`), and
        integer when it indexes (`q.gather(1, action.unsqueeze(1))`)."""
        matches = matches or name_matcher(name)
        spec = self.flow_spec(function_ast, matches, env) if function_ast is not None else None
        if spec is None:
            spec = self.spec_by_name(name, role)
        if function_ast is None:
            return spec
        dims, indexes = shape_usage(function_ast, name)
        if indexes and spec.kind not in ("long", "lengths"):
            return Spec("long", spec.shape, 2)
        if dims > len(spec.shape):
            kind = "float" if spec.kind in ("long", "labels_float") and not indexes else spec.kind
            return Spec(kind, tuple(spec.shape) + (FEATURES if spec.kind == "float" else self.plan.out,) * (dims - len(spec.shape)))
        return spec

    def spec_by_name(self, name, role=None):
        role = role or self.role(name, None)
        tokens = set(_tokens(name))
        if role == "labels":
            return Spec("labels_float" if self.plan.labels == "float" else "long", (BATCH,), 2)
        if role == "mask":
            return Spec("bool", (BATCH,))
        if role == "lengths":
            return Spec("lengths", (BATCH,))
        if role == "tokens":
            return Spec("long", (BATCH, SEQ) if self.plan.tokens == "seq" else (BATCH,), FEATURES)
        if tokens & _IMAGE_WORDS:
            return Spec("float", (BATCH, 3, IMAGE, IMAGE))
        return Spec("float", (BATCH, FEATURES))

    def flow_spec(self, function_ast, matches, env, depth=0):
        """The spec of the first layer the value reaches, following calls of
        modules (`model(x)`, `self.encoder(x)`) and of the class's own methods."""
        if function_ast is None or depth > 4:
            return None
        for call, position in flows(function_ast, matches):
            callee = resolve(call.func, env)
            if isinstance(callee, nn.Module):
                spec = self.module_spec(callee, position, depth + 1)
                if spec is not None:
                    return spec
                continue
            if (
                isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == "self"
                and "self" in env
            ):
                node = self.user.class_ast_of(env["self"])
                method = _methods(node).get(call.func.attr) if node is not None else None
                if method is not None:
                    names = [a.arg for a in method.args.args][1:]
                    if position < len(names):
                        spec = self.flow_spec(method, name_matcher(names[position]), {"self": env["self"]}, depth + 1)
                        if spec is not None:
                            return spec
        return None

    def module_spec(self, module, position, depth=0):
        if isinstance(module, StandIn):
            return None
        node = self.user.class_ast_of(module)
        forward = _methods(node).get("forward") if node is not None else None
        if forward is not None and depth <= 4:
            names = [a.arg for a in forward.args.args][1:]
            if position < len(names):
                spec = self.flow_spec(forward, name_matcher(names[position]), {"self": module}, depth + 1)
                if spec is not None:
                    return spec
                if position == 0:
                    return leaf_spec(module, self.plan)
                return self.spec_by_name(names[position])
        if position == 0:
            return leaf_spec(module, self.plan)
        return None

    # -- loaders and batches -------------------------------------------------

    def loader(self, name, function_ast, env):
        targets = loop_targets(function_ast, name)
        target = targets[0] if targets else _next_target(function_ast, name)
        layout = self.layout_of_target(target, function_ast, env)
        return Loader([self.materialize(layout) for _ in range(3)])

    def batch_from_usage(self, name, function_ast, env):
        return self.materialize(self.layout_of_name(name, function_ast, env))

    def layout_of_target(self, target, function_ast, env):
        if target is None:
            return ("tuple", [("tensor", Spec("float", (BATCH, FEATURES))), ("tensor", self.spec_by_name("labels", "labels"))])
        if isinstance(target, (ast.Tuple, ast.List)):
            return ("tuple", [self.layout_of_target(e, function_ast, env) for e in target.elts if not isinstance(e, ast.Starred)])
        if isinstance(target, ast.Name):
            return self.layout_of_name(target.id, function_ast, env)
        return ("tensor", Spec("float", (BATCH, FEATURES)))

    def layout_of_name(self, name, function_ast, env):
        usage = usage_of(function_ast, name)
        tensor_methods = {"to", "size", "shape", "cuda", "float", "dim", "view", "reshape", "numpy", "cpu", "long", "unsqueeze", "squeeze", "permute", "flatten", "sum", "mean", "detach", "max", "argmax", "ndim", "device", "dtype"}
        if usage["keys"]:
            return ("dict", {k: ("tensor", self.tensor_for(k, function_ast, env, matches=key_matcher(name, k))) for k in usage["keys"]})
        if usage["indexes"] or usage["unpacked"]:
            count = max(usage["indexes"], usage["unpacked"])
            names = self._unpacked_names(function_ast, name, count)
            elements = []
            for index in range(count):
                element_name = names[index] if index < len(names) else ("input" if index == 0 else "labels")
                index_matcher = key_matcher(name, index)
                spec = self.flow_spec(function_ast, index_matcher, env)
                if spec is None and element_name:
                    spec = self.tensor_for(element_name, function_ast, env)
                elements.append(("tensor", spec))
            return ("tuple", elements)
        attrs = usage["attrs"] - tensor_methods
        if attrs and not usage["attrs"] & tensor_methods:
            return ("attrs", {a: ("tensor", self.tensor_for(a, function_ast, env, matches=attr_matcher(name, a))) for a in sorted(attrs)})
        return ("tensor", self.tensor_for(name, function_ast, env))

    def _unpacked_names(self, function_ast, name, count):
        for node in ast.walk(function_ast):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name) and node.value.id == name:
                for target in node.targets:
                    if isinstance(target, (ast.Tuple, ast.List)):
                        return [e.id if isinstance(e, ast.Name) else None for e in target.elts]
        return ["input", "labels"][:count]

    def materialize(self, layout):
        kind, content = layout
        if kind == "tensor":
            return content.make()
        if kind == "tuple":
            return [self.materialize(e) for e in content]
        if kind == "dict":
            return {k: self.materialize(v) for k, v in content.items()}
        if kind == "attrs":
            return types.SimpleNamespace(**{k: self.materialize(v) for k, v in content.items()})
        raise ValueError(kind)


def _next_target(function_ast, name):
    """`batch` in `batch = next(iter(loader))`."""
    for node in ast.walk(function_ast):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call):
            call = node.value
            if isinstance(call.func, ast.Name) and call.func.id == "next" and call.args and _iterates(call.args[0], name):
                return node.targets[0]
    return None


_DEFAULT = object()


# ---------------------------------------------------------------------------
# Running the user's code.


class Attempt:
    """One run of the reproduction under one plan."""

    def __init__(self):
        self.hits = 0
        self.error = None
        self.result = None
        self.finished = False
        self.synth = None
        self.user = None
        self.entry = None
        self.forced = []


def _statement_transform(spec, rewrite=None, force=False, after=None):
    """A transform for UserModule: mark the finding's statement (and rewrite it,
    force the `if`s around it, or add an observer after it)."""
    line = spec["line"]

    def transform(user):
        for _, statements in user.blocks:
            root = ast.Module(body=statements, type_ignores=[])
            located = locate(root, line)
            if located is None:
                continue
            body, index, statement, path = located
            replacement = rewrite(statement) if rewrite else [statement]
            marker = ast.parse("__dl_hit__()").body[0]
            new = [marker] + replacement
            if after is not None:
                new += after(statement)
            for node in new:
                if node is statement:
                    continue
                # Inserted and rewritten code reports the finding's line.
                for child in ast.walk(node):
                    if "lineno" in child._attributes:
                        child.lineno = child.end_lineno = statement.lineno
                        child.col_offset = child.end_col_offset = 0
            body[index : index + 1] = new
            if force:
                for ancestor, field in path:
                    if isinstance(ancestor, ast.If):
                        user.forced.append(ancestor.lineno)
                        ancestor.test = ast.copy_location(ast.Constant(field == "body"), ancestor.test)
            return

    return transform


def entry_point(spec, user, synth):
    """What to call: (callable, description). A method of an nn.Module that
    `forward` reaches runs through the module; other methods on an instance
    built from the constructor; functions with synthesized arguments."""
    target = spec["target"]
    if target["kind"] == "module":
        raise Inconclusive("the code is top-level script code, which the verifier never runs")
    if synth.plan.call_site and callable(user.ns.get(CALL_SITE_FUNCTION)):
        # The file's own call, with the arguments its script code builds.
        function = user.ns[CALL_SITE_FUNCTION]
        return function, f"`{spec['call_site']['call']}` (line {spec['call_site']['line']})"
    ns = user.ns
    if target.get("class"):
        cls = ns.get(target["class"])
        if not isinstance(cls, type):
            raise Inconclusive(f"class `{target['class']}` {user.failed.get(target['class'], 'could not be defined')}")
        node = user.find_class(target["class"])
        methods = _methods(node)
        method = target["function"]
        _stand_in_globals(spec, user, synth, methods[method])
        instance = synth.construct(cls)
        env = {"self": instance}
        if isinstance(instance, nn.Module):
            synth.modules[""] = instance
        else:
            _fill_attributes(instance, methods, method, synth)
            for key, value in vars(instance).items():
                if isinstance(value, nn.Module):
                    synth.modules.setdefault(key, value)
        if isinstance(instance, nn.Module) and spec["code"] in ("DL101", "DL201") and method in _reached_from_forward(methods):
            forward = methods["forward"]
            signature = inspect.signature(type(instance).forward)
            args, kwargs = synth.arguments(signature, forward, env, skip_self=True)
            return (lambda: instance(*args, **kwargs)), f"`{target['class']}.forward`"
        function = getattr(instance, method)
        signature = inspect.signature(function)
        args, kwargs = synth.arguments(signature, methods[method], env, skip_self=False)
        return (lambda: function(*args, **kwargs)), f"`{target['class']}.{method}`"
    function = ns.get(target["function"])
    if not callable(function):
        raise Inconclusive(f"`{target['function']}` {user.failed.get(target['function'], 'could not be defined')}")
    node = user.find_function(target["function"])
    _stand_in_globals(spec, user, synth, node)
    signature = inspect.signature(function)
    args, kwargs = synth.arguments(signature, node, {}, skip_self=False)
    described = "the top-level statements it uses" if target.get("script") else f"`{target['function']}`"
    return (lambda: function(*args, **kwargs)), described


# Roles worth standing in for when a module-level script variable holds them.
_GLOBAL_ROLES = {"model", "loader", "optimizer", "criterion", "config", "device", "sink", "scheduler", "dtype"}
_TENSOR_TYPES = {"Tensor": "FloatTensor", "FloatTensor": "FloatTensor", "LongTensor": "LongTensor", "ByteTensor": "ByteTensor"}


def _stand_in_globals(spec, user, synth, function_ast):
    """Module-level script variables the function reads (`model = Net()` at the
    bottom of a script, `opt = parser.parse_args()`): never run, but a
    stand-in chosen by name and use takes their place."""
    if function_ast is None:
        return
    loaded = {n.id for n in ast.walk(function_ast) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    for name in sorted(loaded & set(spec.get("unavailable", {}))):
        if name in _TENSOR_TYPES:
            user.ns[name] = getattr(torch, _TENSOR_TYPES[name])
            continue
        role = synth.role(name, function_ast)
        if role not in _GLOBAL_ROLES:
            continue
        parameter = inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        try:
            user.ns[name] = synth.value_for(parameter, function_ast, {}, constructor=False)
        except Exception:
            continue
        synth.globals_stood_in.append(name)
        if isinstance(user.ns[name], nn.Module):
            synth.modules.setdefault(name, user.ns[name])


class _SelfToName(ast.NodeTransformer):
    def visit_Attribute(self, node):
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            return ast.copy_location(ast.Name(node.attr, node.ctx), node)
        return self.generic_visit(node)


def _fill_attributes(instance, methods, method, synth):
    """Attributes the method reads that the constructor did not set (a
    trainer whose `fit` builds `self.network`): stand-ins by name and use."""
    node = methods.get(method)
    if node is None:
        return
    attributes = {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self" and isinstance(n.ctx, ast.Load)
    }
    missing = sorted(a for a in attributes if a not in methods and not _has(instance, a))
    if not missing:
        return
    plain = _SelfToName().visit(_copy_function(node))
    for name in missing:
        parameter = inspect.Parameter(name, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        try:
            value = synth.value_for(parameter, plain, dict(vars(instance)), constructor=False)
            setattr(instance, name, value)
        except Exception:
            continue
        synth.attributes_stood_in.append(name)


def _has(instance, name):
    try:
        getattr(instance, name)
    except Exception:
        return False
    return True


def _copy_function(node):
    copy = ast.parse(ast.unparse(node)).body[0]
    return copy


def _reached_from_forward(methods):
    if "forward" not in methods:
        return set()
    reached, todo = {"forward"}, ["forward"]
    while todo:
        for node in ast.walk(methods[todo.pop()]):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and node.attr in methods
                and node.attr not in reached
            ):
                reached.add(node.attr)
                todo.append(node.attr)
    return reached


def attempt(spec, plan, rewrite=None, after=None, helpers=None, undefined=None, around=None):
    """Run the reproduction once; errors are kept on the attempt, not raised.
    `undefined`: names an earlier attempt found missing (a star import)."""
    _SYNTHESIZED.clear()
    run = Attempt()
    run.plan = plan
    transform = _statement_transform(spec, rewrite=rewrite, force=plan.force, after=after)
    _BASIS["call_site"] = plan.call_site
    seed_everything(0)
    try:
        user = UserModule(spec, transform)
    except SyntaxError as error:
        run.error = error
        return run
    run.user = user
    run.forced = user.forced

    def hit():
        run.hits += 1

    user.ns["__dl_hit__"] = hit
    for name in undefined or ():
        user.ns.setdefault(name, Missing(name, "is not defined in the reproduction (a star import?)", user.used_missing))
    for name, helper in (helpers or {}).items():
        user.ns[name] = helper
    synth = Synth(user, plan, spec.get("hints"))
    run.synth = synth
    try:
        with cpu_only():
            entry, run.entry = entry_point(spec, user, synth)
            seed_everything(0)
            with around() if around is not None else contextlib.nullcontext():
                run.result = entry()
        run.finished = True
    except Enough:
        run.finished = True
    except Inconclusive:
        raise
    except (Exception, SystemExit) as error:  # noqa: BLE001 - the user's code may raise anything
        run.error = error
    finally:
        user.close()
    return run


def plans(spec):
    base = Plan()
    if spec.get("call_site"):
        yield base.but(call_site=True)
    yield base
    yield base.but(labels="float", out=1)
    yield base.but(tokens="flat")
    yield base.but(spatial=64)
    for size in spec.get("hints", {}).get("sizes", []):
        if size not in (32, 64):
            yield base.but(spatial=size)
    yield base.but(labels="float", out=4)
    yield base.but(labels="long", out=1, tokens="flat")
    yield base.but(spatial=224)


def find_working(spec, rewrite=None, after=None, helpers=None, need_finish=False, budget=None, around=None):
    """The first attempt whose run reaches the finding's line (and, with
    need_finish, returns); when a run completes without reaching the line,
    the same plan again with the `if`s around the line forced. Raises
    Inconclusive with the best reason."""
    started = time.monotonic()
    first_error = None
    tried = 0

    def good(run):
        return run.hits and (run.finished or not need_finish)

    undefined = []
    for plan in plans(spec):
        if tried >= MAX_ATTEMPTS or (budget and time.monotonic() - started > budget):
            break
        run = attempt(spec, plan, rewrite=rewrite, after=after, helpers=helpers, undefined=undefined, around=around)
        tried += 1
        # A name no block defines (`from utils import *`): stand it in, run again.
        while isinstance(run.error, NameError) and len(undefined) < 6 and not run.hits:
            name = getattr(run.error, "name", None) or _undefined_name(run.error)
            if not name or name in undefined:
                break
            undefined.append(name)
            run = attempt(spec, plan, rewrite=rewrite, after=after, helpers=helpers, undefined=undefined, around=around)
        if good(run):
            return run
        if run.error is not None and _is_memory_error(run.error):
            raise ResourceLimit("memory limit reached: " + describe_error(run.error, spec).split(": ", 1)[1])
        if run.error is None and not run.hits:
            forced = attempt(spec, plan.but(force=True), rewrite=rewrite, after=after, helpers=helpers, undefined=undefined, around=around)
            tried += 1
            if good(forced):
                return forced
            run = forced
        if run.error is not None and first_error is None:
            first_error = run
    if first_error is not None:
        raise Inconclusive(describe_error(first_error.error, spec, first_error))
    raise Inconclusive(f"line {spec['line']} never ran with synthesized inputs")


def _undefined_name(error):
    match = re.search(r"name '(\w+)' is not defined", str(error))
    return match.group(1) if match else None


def describe_error(error, spec, run=None):
    """`TypeError: ... (line 23)`: the error, at the last line of the user's file it
    passed, and which missing names the code touched on the way."""
    line = _user_line(error, spec)
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    text = text if len(text) <= 160 else text[:157] + "..."
    where = f" on line {line}" if line else ""
    missing = ""
    if run is not None and run.user is not None and run.user.used_missing:
        name, reason = next(iter(run.user.used_missing.items()))
        more = len(run.user.used_missing) - 1
        missing = f" (it needs `{name}`, which {reason}" + (f"; {more} more missing" if more else "") + ")"
    return f"the code could not run with synthesized inputs: {type(error).__name__}: {text}{where}{missing}"


# What the verdict of the reproduction running now rests on, reset by `run`:
# "pattern" when a probe fell back to synthetic tensors, the stand-ins
# `notes` reported otherwise. `run` turns it into the verdict's basis.
_BASIS = {"pattern": False, "stand_ins": [], "call_site": False}


def notes(run):
    """What the evidence should say was stood in (and, so, what the verdict rests on)."""
    parts = []
    others = set(run.synth.globals_stood_in + run.synth.attributes_stood_in) if run.synth is not None else set()
    models = [n for n in dict.fromkeys(run.synth.stand_ins) if n not in others] if run.synth is not None else []
    if models:
        names = ", ".join(f"`{n}`" for n in models)
        parts.append(f"stand-in model for {names}")
    if run.synth is not None and run.synth.globals_stood_in:
        names = ", ".join(f"`{n}`" for n in run.synth.globals_stood_in)
        parts.append(f"stand-ins for the script variables {names}")
    if run.synth is not None and run.synth.attributes_stood_in:
        names = ", ".join(f"`self.{n}`" for n in run.synth.attributes_stood_in)
        parts.append(f"stand-ins for {names}")
    if run.user is not None and run.user.used_missing:
        names = ", ".join(f"`{n}`" for n in list(run.user.used_missing)[:3])
        parts.append(f"{names} stubbed")
    if run.forced:
        lines = ", ".join(str(n) for n in sorted(set(run.forced)))
        parts.append(f"`if` on line {lines} forced")
    _BASIS["stand_ins"].extend(parts)
    return f" ({'; '.join(parts)})" if parts else ""


def weighted_sum(tensors):
    """A scalar whose gradient reaches every output element (a plain `.sum()`
    of a softmax would give zero gradients)."""
    generator = torch.Generator().manual_seed(2)
    total = None
    for tensor in tensors:
        if not (tensor.is_floating_point() or tensor.is_complex()) or not tensor.requires_grad:
            continue
        weights = torch.randn(tensor.shape, generator=generator, dtype=torch.float32)
        term = (tensor.float() * weights).sum()
        total = term if total is None else total + term
    return total


def named_parameters(synth):
    seen = set()
    for prefix, module in synth.modules.items():
        if not isinstance(module, nn.Module):
            continue
        for name, parameter in module.named_parameters():
            if id(parameter) in seen:
                continue
            seen.add(id(parameter))
            yield (f"{prefix}.{name}" if prefix else name), parameter


def _names(names, limit=4):
    quoted = [f"`{n}`" for n in names]
    if len(quoted) > limit:
        return ", ".join(quoted[:limit]) + f" and {len(quoted) - limit} more"
    return ", ".join(quoted)


def _number(value):
    if value == 0:
        return "0"
    return f"{value:.2g}"


# ---------------------------------------------------------------------------
# Probes: one per rule code, each returns (status, evidence).


def probe_dl201(spec, budget):
    """Run forward and backward; the named submodules' trainable parameters
    must all keep `grad None`."""
    members = re.findall(r"`([^`]+)`", spec["message"].split(" never ")[0])
    run = find_working(spec, need_finish=True, budget=budget)
    module = run.synth.modules.get("")
    if module is None:
        raise Inconclusive(f"`{spec['target'].get('class')}` is not an nn.Module")
    outputs = tensors_in(run.result)
    loss = weighted_sum(outputs)
    if loss is not None:
        loss.backward()
    frozen, trained, not_trainable = [], [], []
    for member in members:
        sub = module
        try:
            for part in member.split("."):
                sub = getattr(sub, part)
        except AttributeError:
            raise Inconclusive(f"the module has no `{member}` when built with synthesized arguments")
        if not isinstance(sub, nn.Module):
            raise Inconclusive(f"`{member}` is not a module at run time")
        params = [(f"{member}.{n}", p) for n, p in sub.named_parameters() if p.requires_grad]
        if not list(sub.parameters()):
            raise Inconclusive(f"`{member}` has no parameters")
        if not params:
            not_trainable.append(member)
        for name, parameter in params:
            (frozen if parameter.grad is None else trained).append(name)
    others = [n for n, p in module.named_parameters() if p.grad is not None and not any(n.startswith(m + ".") for m in members)]
    details = {
        "parameters": [
            {"name": n, "requires_grad": p.requires_grad, "got_grad": p.grad is not None, "numel": p.numel()}
            for n, p in list(module.named_parameters())[:400]
        ]
    }
    if trained:
        return "refuted", f"{_names(trained)} got gradients after backward through {run.entry}" + notes(run), details
    if not frozen:
        return "refuted", f"{_names(not_trainable)} {'has' if len(not_trainable) == 1 else 'have'} no parameter with requires_grad=True: nothing trainable is cut off" + notes(run), details
    tail = f"; {_names(others, 2)} did get gradients" if others else ("; no output required grad" if loss is None else "")
    return "confirmed", f"{_names(frozen)}: requires_grad=True, grad None after backward{tail}" + notes(run), details


def _edited_name(spec):
    match = re.search(r"changes `([A-Za-z_][A-Za-z0-9_]*)`", spec["message"])
    return match.group(1) if match else None


def _is_data_of(node, name):
    return isinstance(node, ast.Attribute) and node.attr == "data" and isinstance(node.value, ast.Name) and node.value.id == name


def _write_position(statement, name):
    """The `name.data` node the statement edits in place."""
    if isinstance(statement, ast.AugAssign):
        target = statement.target
        return target.value if isinstance(target, ast.Subscript) and _is_data_of(target.value, name) else target
    if isinstance(statement, ast.Assign):
        for target in statement.targets:
            if isinstance(target, ast.Subscript) and _is_data_of(target.value, name):
                return target.value
    for node in ast.walk(statement):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.endswith("_"):
            receiver = node.func.value
            while isinstance(receiver, ast.Call) and isinstance(receiver.func, ast.Attribute):
                receiver = receiver.func.value
            if _is_data_of(receiver, name):
                return receiver
    return None


class _Replace(ast.NodeTransformer):
    def __init__(self, name, write, write_with, read_with):
        self.name, self.write, self.write_with, self.read_with = name, write, write_with, read_with

    def visit_Attribute(self, node):
        if _is_data_of(node, self.name):
            return self.write_with() if node is self.write else self.read_with()
        return self.generic_visit(node)


def _detach_rewrite(name):
    """The same edit through `.detach()`: autograd's version check sees it."""

    def rewrite(statement):
        statement = _copy(statement)
        write = _write_position(statement, name)
        detached = lambda: ast.parse(f"{name}.detach()", mode="eval").body  # noqa: E731
        if isinstance(statement, ast.AugAssign) and statement.target is write:
            first = ast.parse(f"__dl_alias = {name}.detach()").body[0]
            statement.target = ast.Name("__dl_alias", ast.Store())
            statement = _Replace(name, None, detached, detached).visit(statement)
            return [first, statement]
        return [_Replace(name, write, detached, detached).visit(statement)]

    return rewrite


def _visible_rewrite(name):
    """The edit made visible to autograd on a copy: `x = x.clone()` then the
    edit on `x` itself, so backward differentiates it and no saved tensor changes."""

    def rewrite(statement):
        statement = _copy(statement)
        write = _write_position(statement, name)
        before = ast.parse(f"__dl_old = {name}\n{name} = {name}.clone()").body
        plain = lambda: ast.Name(name, ast.Load())  # noqa: E731
        old = lambda: ast.Name("__dl_old", ast.Load())  # noqa: E731
        if isinstance(statement, ast.AugAssign) and statement.target is write:
            statement.target = ast.Name(name, ast.Store())
            statement = _Replace(name, None, plain, old).visit(statement)
            return before + [statement]
        return before + [_Replace(name, write, plain, old).visit(statement)]

    return rewrite


def _copy(node):
    return ast.parse(ast.unparse(node)).body[0] if hasattr(ast, "unparse") else node


def _gradients(run):
    """name -> gradient after the run (backward from the outputs when the code did not call it)."""
    params = list(named_parameters(run.synth))
    if not any(p.grad is not None for _, p in params) and run.finished:
        loss = weighted_sum(tensors_in(run.result))
        if loss is not None:
            loss.backward()
    return {n: p.grad.detach().clone() for n, p in params if p.grad is not None}


def _run_plan(spec, plan, rewrite):
    """One run under a known plan; (gradients, error)."""
    run = attempt(spec, plan, rewrite=rewrite)
    error = run.error
    grads = {}
    if error is None and run.synth is not None:
        try:
            grads = _gradients(run)
        except Exception as backward_error:  # noqa: BLE001
            error = backward_error
    return grads, error, run


def _data_alias(spec):
    """`(alias, source)` when the edit goes through a name bound to `source.data`."""
    match = re.search(r"\(`([A-Za-z_][A-Za-z0-9_]*)` is `([A-Za-z_][A-Za-z0-9_]*)\.data`\)", spec["message"])
    return match.groups() if match else None


def _alias_rewrites(alias, name):
    """The edit through `alias = name.data`, once through `.detach()` (the same
    storage, seen by the version check) and once visible to autograd on a copy."""

    def detached(statement):
        return ast.parse(f"{alias} = {name}.detach()").body + [_copy(statement)]

    def visible(statement):
        return ast.parse(f"{name} = {name}.clone()\n{alias} = {name}").body + [_copy(statement)]

    return detached, visible


def probe_dl101(spec, budget):
    """The edit as written, through `.detach()`, and visible on a copy: the
    detached edit trips the version check when it overwrote a saved tensor,
    and the gradients differ from the visible edit's when backward used the
    edited values."""
    name = _edited_name(spec)
    if name is None:
        raise Inconclusive("the finding names no edited tensor")
    alias = _data_alias(spec)
    if alias is not None:
        detach_rewrite, visible_rewrite = _alias_rewrites(*alias)
    else:
        detach_rewrite, visible_rewrite = _detach_rewrite(name), _visible_rewrite(name)
    run = find_working(spec, budget=budget)
    plan = run.plan
    original = {}
    if run.error is None:
        try:
            original = _gradients(run)
        except Exception as error:  # noqa: BLE001
            run.error = error
    _, detach_error, _ = _run_plan(spec, plan, detach_rewrite)
    visible, visible_error, _ = _run_plan(spec, plan, visible_rewrite)
    tripped = detach_error is not None and "modified by an inplace operation" in str(detach_error)
    parts = []
    if tripped:
        saved_by = re.search(r"output \d+ of (\w+)", str(detach_error))
        by = f" ({saved_by.group(1)} saved `{name}` for backward)" if saved_by else ""
        parts.append(
            f"the same edit through `.detach()` makes backward raise \"one of the variables needed for gradient "
            f"computation has been modified by an inplace operation\"{by}"
        )
    difference, where = 0.0, None
    if original and visible and visible_error is None:
        for key, grad in original.items():
            other = visible.get(key)
            if other is None or other.shape != grad.shape:
                continue
            delta = (grad - other).abs().max().item()
            scale = max(grad.abs().max().item(), other.abs().max().item(), 1e-12)
            if delta > 1e-6 * max(scale, 1.0) and delta > difference:
                difference, where = delta, key
        only_one = set(original) ^ set(visible)
        if only_one and where is None:
            where = sorted(only_one)[0]
            difference = float("nan")
    if where is not None:
        amount = "" if math.isnan(difference) else f" by up to {_number(difference)}"
        parts.append(f"gradients differ from the edit made visible to autograd{amount} (`{where}`)")
    elif tripped and original and visible:
        parts.append("the gradients happen to match at these inputs")
    if tripped or where is not None:
        return "confirmed", "; ".join(parts) + notes(run)
    if detach_error is not None and not tripped:
        raise Inconclusive(describe_error(detach_error, spec))
    if not original:
        raise Inconclusive("no gradient reached any parameter, so nothing could be compared" + notes(run))
    return "refuted", (
        f"the edit of `{name}` overwrote no tensor saved for backward and the gradients equal those with the edit "
        f"made visible to autograd" + notes(run)
    )


class SavedBytes:
    """Bytes of activations autograd saved and still holds (parameters left out)."""

    def __init__(self):
        self.live = 0

    def pack(self, tensor):
        # Detached: a saved output holding itself (through its grad_fn) would
        # make a cycle through C++ that Python's collector cannot free.
        holder = _Saved(tensor.detach())
        is_parameter = tensor.requires_grad and (tensor.is_leaf or (tensor._base is not None and tensor._base.is_leaf))
        if not is_parameter:
            size = tensor.numel() * tensor.element_size()
            self.live += size
            weakref.finalize(holder, self._release, size)
        return holder

    def _release(self, size):
        self.live -= size

    @staticmethod
    def unpack(holder):
        return holder.tensor


class _Saved:
    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor):
        self.tensor = tensor


def _called_from(spec, statement_lines=None):
    """Whether the caller's caller runs in the user's file (on these lines)."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == spec["path"]:
            return statement_lines is None or statement_lines[0] <= frame.f_lineno <= statement_lines[1]
        frame = frame.f_back
    return False


def _statement_lines(spec):
    """First and last line of the statement the finding is on."""
    for block in spec["blocks"]:
        tree = ast.parse(block["text"])
        ast.increment_lineno(tree, block["line"] - 1)
        located = locate(tree, spec["line"])
        if located is not None:
            statement = located[2]
            return statement.lineno, statement.end_lineno or statement.lineno
    return spec["line"], spec.get("end_line") or spec["line"]


def probe_dl301(spec, budget):
    """Count, per call of the model on the finding's line, the bytes of saved
    activations the call left alive, and whether its output requires grad."""
    lines = _statement_lines(spec)
    saved = SavedBytes()
    steps = []
    state = {"depth": 0, "start": 0, "ours": False}

    def pre(module, args):
        if state["depth"] == 0:
            state["ours"] = _called_from(spec, lines)
            state["start"] = saved.live
        state["depth"] += 1

    def post(module, args, output):
        state["depth"] -= 1
        if state["depth"] == 0 and state["ours"]:
            # Any tensor of the output that carries a graph (a dict's `boxes`
            # may be plain while its `embeddings` are not).
            tensors = tensors_in(output)
            tensor = next((t for t in tensors if t.requires_grad), tensors[0] if tensors else None)
            steps.append(
                {
                    "bytes": saved.live - state["start"],
                    "live": saved.live,
                    "requires_grad": bool(tensor is not None and tensor.requires_grad),
                    "grad_fn": type(tensor.grad_fn).__name__ if tensor is not None and tensor.grad_fn is not None else None,
                }
            )
            if len(steps) >= 3:
                raise Enough()

    if spec["target"]["kind"] == "module":
        return _pattern_dl301(spec, "the loop is top-level script code, which the verifier never runs")
    handles = [
        nn.modules.module.register_module_forward_pre_hook(pre),
        nn.modules.module.register_module_forward_hook(post),
    ]
    try:
        with torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
            try:
                run = find_working(spec, budget=budget, helpers={})
            except Inconclusive as reason:
                if steps:
                    run = None
                elif isinstance(reason, ResourceLimit):
                    raise
                else:
                    return _pattern_dl301(spec, str(reason))
    finally:
        for handle in handles:
            handle.remove()
        state["depth"] = 0
    if not steps:
        raise Inconclusive("the model call on this line never ran with synthesized inputs")
    call = spec.get("hints", {}).get("call") or "the model call"
    suffix = notes(run) if run is not None else ""
    first = steps[0]
    details = {"steps": [{"kept_bytes": s["bytes"], "live_bytes": s["live"]} for s in steps]}
    if not first["requires_grad"]:
        return "refuted", f"`{call}` returned requires_grad=False: no graph was recorded" + suffix, details
    per_step = sorted(s["bytes"] for s in steps)[len(steps) // 2]
    if per_step <= 0:
        return "refuted", f"`{call}` kept no saved activations alive (output grad_fn={first['grad_fn']})" + suffix, details
    text = (
        f"`{call}` returned requires_grad=True (grad_fn={first['grad_fn']}); each evaluation step kept "
        f"{_bytes(per_step)} of saved activations alive"
    )
    if len(steps) >= 3 and steps[-1]["live"] >= 2.5 * per_step:
        text += f", {_bytes(steps[-1]['live'])} held after {len(steps)} steps"
    return "confirmed", text + suffix, details


def _bytes(count):
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    return str(count)


def _pattern_dl301(spec, reason):
    """The same operation on synthesized tensors: a model call with autograd on."""
    _BASIS["pattern"] = True
    saved = SavedBytes()
    seed_everything(0)
    model = nn.Sequential(nn.Linear(FEATURES, 16), nn.ReLU(), nn.Linear(16, 4))
    model.eval()
    with torch.autograd.graph.saved_tensors_hooks(saved.pack, saved.unpack):
        before = saved.live
        out = model(torch.randn(BATCH, FEATURES))
        kept = saved.live - before
    call = spec.get("hints", {}).get("call") or "the model call"
    return "confirmed", (
        f"pattern-level ({reason}): a model called as in `{call}` after `.eval()` with autograd on returns "
        f"requires_grad={out.requires_grad} (grad_fn={type(out.grad_fn).__name__}) and keeps {_bytes(kept)} of "
        f"saved activations alive per step"
    )


def count_nodes(value):
    """Autograd nodes reachable from the tensors in `value`."""
    roots = [t.grad_fn for t in tensors_in(value) if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    seen, keep, todo = set(), [], list(roots)
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        keep.append(node)
        for child, _ in getattr(node, "next_functions", ()):
            if child is not None:
                todo.append(child)
    return len(seen)


def _accumulator(statement):
    """The expression an accumulation statement grows."""
    if isinstance(statement, ast.AugAssign):
        return statement.target
    if isinstance(statement, ast.Assign):
        return statement.targets[0]
    for node in ast.walk(statement):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in (
            "append", "extend", "insert", "add", "update", "__setitem__", "setdefault",
        ):
            return node.func.value
    return None


def probe_dl401(spec, budget):
    """After each run of the accumulation, count the autograd nodes reachable
    from the accumulator: confirmed when the count grows every iteration."""
    counts = []
    described = {}

    def observe(value):
        counts.append(count_nodes(value))
        if len(counts) >= 3:
            raise Enough()

    def after(statement):
        target = _accumulator(statement)
        if target is None:
            return []
        described["text"] = ast.unparse(target) if hasattr(ast, "unparse") else "the accumulator"
        load = ast.parse(ast.unparse(target), mode="eval").body
        return [ast.Expr(ast.Call(ast.Name("__dl_observe__", ast.Load()), [load], []))]

    try:
        run = find_working(spec, after=after, helpers={"__dl_observe__": observe}, budget=budget)
    except Inconclusive as reason:
        if len(counts) >= 2:
            run = None
        elif isinstance(reason, ResourceLimit):
            raise
        else:
            return _pattern_dl401(spec, str(reason), described.get("text"))
    name = described.get("text", "the accumulator")
    if len(counts) < 2:
        raise Inconclusive(f"the accumulation ran {len(counts)} time with synthesized inputs; growth needs two or more")
    suffix = notes(run) if run is not None else ""
    series = ", ".join(str(c) for c in counts)
    details = {"graph_nodes": list(counts), "accumulator": name}
    if all(b > a for a, b in zip(counts, counts[1:])):
        return "confirmed", f"autograd nodes reachable from `{name}` after iterations 1-{len(counts)}: {series}" + suffix, details
    if counts[-1] == 0:
        return "refuted", f"`{name}` holds no autograd graph (nodes after each iteration: {series})" + suffix, details
    return "refuted", f"the graph reachable from `{name}` does not grow: {series} nodes after iterations 1-{len(counts)}" + suffix, details


def _pattern_dl401(spec, reason, name):
    _BASIS["pattern"] = True
    if name is None and spec.get("hints", {}).get("statement"):
        try:
            target = _accumulator(ast.parse(spec["hints"]["statement"]).body[0])
            name = ast.unparse(target) if target is not None else None
        except SyntaxError:
            name = None
    name = name or "the accumulator"
    seed_everything(0)
    model = nn.Linear(FEATURES, 1)
    total, history, counts = 0.0, [], []
    for _ in range(3):
        loss = model(torch.randn(BATCH, FEATURES)).pow(2).mean()
        loss.backward()
        total = total + loss
        history.append(loss)
        counts.append(count_nodes(total))
    series = ", ".join(str(c) for c in counts)
    return "confirmed", (
        f"pattern-level ({reason}): accumulating a loss that requires grad, as `{name}` does, keeps "
        f"{series} autograd nodes reachable after iterations 1-3"
    )


def _numpy_available():
    try:
        import numpy  # noqa: F401
    except ImportError:
        return False
    return True


def probe_dl402(spec, budget):
    """Record every `.numpy()` called from the finding's statement: what
    it raised, and whether its tensor required grad."""
    lines = _statement_lines(spec)
    calls = []
    original = torch.Tensor.numpy
    has_numpy = _numpy_available()

    def numpy(self, *args, **kwargs):
        ours = _called_from(spec, lines)
        try:
            value = original(self, *args, **kwargs)
        except RuntimeError as error:
            if ours:
                calls.append((self.requires_grad, str(error)))
            raise
        if ours:
            calls.append((self.requires_grad, None))
        return value

    torch.Tensor.numpy = numpy
    try:
        try:
            run = find_working(spec, budget=budget)
        except Inconclusive as reason:
            if calls:
                run = None
            elif isinstance(reason, ResourceLimit):
                raise
            else:
                return _pattern_dl402(spec, str(reason))
    finally:
        torch.Tensor.numpy = original
    suffix = notes(run) if run is not None else ""
    call = spec.get("hints", {}).get("call") or ".numpy()"
    for requires_grad, message in calls:
        if message and "requires grad" in message:
            return "confirmed", f"`{call}` raised RuntimeError: {message}" + suffix
        if message and requires_grad and not has_numpy:
            return "confirmed", (
                f"`{call}` was called on a tensor with requires_grad=True (numpy is not installed here, so torch "
                f"raised \"{message}\" before its requires-grad check)" + suffix
            )
    if calls:
        return "refuted", f"`{call}` ran on a tensor with requires_grad=False and returned an array" + suffix
    raise Inconclusive(f"`{call}` never ran with synthesized inputs")


def _pattern_dl402(spec, reason):
    _BASIS["pattern"] = True
    seed_everything(0)
    out = nn.Linear(FEATURES, 4)(torch.randn(BATCH, FEATURES))
    try:
        out.numpy()
    except RuntimeError as error:
        message = str(error)
    else:
        return "inconclusive", f"{reason}; the pattern-level check did not raise"
    call = spec.get("hints", {}).get("call") or ".numpy()"
    return "confirmed", f"pattern-level ({reason}): `.numpy()` on a model output, as in `{call}`, raises RuntimeError: {message}"


@contextlib.contextmanager
def watching_backward(spec, lines=None, when=lambda: True):
    """Meanwhile, each backward the user's code calls (from `lines`, and
    while `when()`) adds its outcome to the list yielded: None when it ran,
    its RuntimeError message when it raised."""
    outcomes = []
    originals = (torch.Tensor.backward, torch.autograd.backward)

    def watch(function):
        def wrapper(*args, **kwargs):
            if not (_called_from(spec, lines) and when()):
                return function(*args, **kwargs)
            try:
                result = function(*args, **kwargs)
            except RuntimeError as error:
                outcomes.append(str(error))
                raise
            outcomes.append(None)
            return result

        return wrapper

    torch.Tensor.backward, torch.autograd.backward = (watch(function) for function in originals)
    try:
        yield outcomes
    finally:
        torch.Tensor.backward, torch.autograd.backward = originals


def _user_line(error, spec):
    """The last line of the user's file the error's traceback passed."""
    line, tb = None, error.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == spec["path"]:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _done_marker(statement):
    return ast.parse("__dl_done__()").body


def raises_on_its_line(expected):
    """A probe for a rule whose finding says the statement raises: run to the
    statement; confirmed when it raised the RuntimeError the message names,
    refuted when it ran through."""

    def probe(spec, budget):
        done = []
        first, last = _statement_lines(spec)
        run = find_working(spec, after=_done_marker, helpers={"__dl_done__": lambda: done.append(True)}, budget=budget)
        error = run.error
        mode, how = _callers_mode(spec), ""
        if done and mode is not None:
            # The finding says a caller runs this code with autograd off: run it so.
            done.clear()
            run = find_working(spec, after=_done_marker, helpers={"__dl_done__": lambda: done.append(True)}, budget=budget, around=mode[1])
            how = mode[0]
            _BASIS["stand_ins"].append(how)
            how = f" ({how})"
            error = run.error
        if done:
            outside = _grad_off_outside(spec, run)
            if outside is not None:
                raise Inconclusive(
                    f"the statement ran without raising, but the finding's autograd-off region (line {outside}) lies outside the code the reproduction ran" + notes(run)
                )
            return "refuted", "the statement ran without raising" + notes(run) + how
        if error is not None and first <= (_user_line(error, spec) or 0) <= last:
            text = str(error).strip().splitlines()[0] if str(error).strip() else ""
            if expected in text:
                return "confirmed", f"the statement raised {type(error).__name__}: {text}" + notes(run) + how
        if error is not None:
            raise Inconclusive(describe_error(error, spec, run))
        raise Inconclusive("the statement never finished with synthesized inputs")

    probe.__doc__ = f'The statement on the finding\'s line raises "{expected}".'
    return probe


def _grad_off_outside(spec, run):
    """The line a finding says runs with autograd off (`... with autograd off (line 41)`)
    when it lies outside the function the reproduction ran (a module-level switch)."""
    match = re.search(r"autograd off \(line (\d+)\)", spec["message"])
    target = spec["target"]
    if match is None or run.user is None or not target.get("function"):
        return None
    node = run.user.find_function(target["function"], target.get("class"))
    line = int(match.group(1))
    if node is None or node.lineno <= line <= (node.end_lineno or node.lineno):
        return None
    return line


def _callers_mode(spec):
    """`(what the evidence says, context factory)` for the grad mode the code's
    callers set: one the finding names (`enable_grad()` does not lift
    `inference_mode()`), or a script-level `set_grad_enabled(False)`; or None."""
    if re.search(r"does not lift `(torch\.)?inference_mode\(\)`", spec["message"]):
        return "run under `torch.inference_mode()` as its caller does", torch.inference_mode
    line = spec.get("hints", {}).get("script_grad_off")
    if line is not None:
        return f"run with autograd off, as the script's `torch.set_grad_enabled(False)` on line {line} leaves it", lambda: torch.set_grad_enabled(False)
    return None


def _named(spec, pattern):
    match = re.search(pattern, spec["message"])
    if match is None:
        raise Inconclusive("the finding names no tensor")
    return match.group(1)


def _observing(spec, name, before=False):
    """`(after, helpers, seen)`: observe `name` just before or just after the finding's statement."""
    seen = {}

    def observe(value):
        if "value" not in seen:
            seen["value"] = value
            if isinstance(value, torch.Tensor):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # .grad of a non-leaf warns
                    seen["state"] = (value.is_leaf, value.requires_grad, value.grad is not None, value.retains_grad)
            seen["grad_enabled"] = torch.is_grad_enabled()

    code = ast.parse(f"__dl_observe__({name})").body
    if before:
        return None, (lambda statement: code + [_copy(statement)]), {"__dl_observe__": observe}, seen
    return (lambda statement: code), None, {"__dl_observe__": observe}, seen


def probe_dl206(spec, budget):
    """After the statement whose `.detach()` result is dropped, the tensor still requires grad."""
    name = _named(spec, r"`([A-Za-z_][A-Za-z0-9_.]*)` is unchanged")
    call = _named(spec, r"^`([^`]+)`")
    if "detach" not in call:
        raise Inconclusive(f"only a dropped `.detach()` shows on the CPU; `{call}` changes nothing here either way")
    after, _, helpers, seen = _observing(spec, name)
    run = find_working(spec, after=after, helpers=helpers, budget=budget)
    if "state" not in seen:
        raise Inconclusive(f"`{name}` was not a tensor after the statement with synthesized inputs" + notes(run))
    _, requires_grad, _, _ = seen["state"]
    if requires_grad:
        return "confirmed", f"`{name}` still requires grad after `{call}`: it is attached to its graph" + notes(run)
    # The dropped call is a no-op either way; only an attached tensor shows the harm.
    raise Inconclusive(f"`{name}` did not require grad when the line ran, so the dropped detach had nothing to cut at these inputs" + notes(run))


def probe_dl304(spec, budget):
    """Right after the bare grad-mode statement, autograd is still on."""
    call = _named(spec, r"^`([^`]+)`")
    after, _, helpers, seen = _observing(spec, "None")
    run = find_working(spec, after=after, helpers=helpers, budget=budget)
    if "grad_enabled" not in seen:
        raise Inconclusive("the code after the statement never ran with synthesized inputs" + notes(run))
    if seen["grad_enabled"]:
        return "confirmed", f"autograd was still on right after `{call}`" + notes(run)
    return "refuted", f"autograd was off right after `{call}`" + notes(run)


def probe_dl503(spec, budget):
    """When the statement reads `.grad`, the tensor is not a leaf and its `.grad` is None."""
    name = _named(spec, r"`([A-Za-z_][A-Za-z0-9_.]*)` is computed")
    _, rewrite, helpers, seen = _observing(spec, name, before=True)
    run = find_working(spec, rewrite=rewrite, helpers=helpers, budget=budget)
    if "state" not in seen:
        raise Inconclusive(f"`{name}` was not a tensor when `.grad` was read with synthesized inputs" + notes(run))
    is_leaf, requires_grad, has_grad, retains = seen["state"]
    state = f"`{name}`: is_leaf={is_leaf}, requires_grad={requires_grad}, retains_grad={retains}"
    if has_grad:
        return "refuted", f"{state}: its .grad held a gradient when read" + notes(run)
    if is_leaf:
        return "refuted", f"{state}: a leaf, whose .grad backward fills" + notes(run)
    return "confirmed", f"{state}: its .grad was None when read" + notes(run)


def probe_dl203(spec, budget):
    """The backward on the finding's line raises "does not require grad"."""
    with watching_backward(spec, _statement_lines(spec)) as raised:
        try:
            run = find_working(spec, budget=budget)
        except Inconclusive:
            if not raised:
                raise
            run = None
    suffix = notes(run) if run is not None else ""
    for message in raised:
        if message and "does not require grad" in message:
            return "confirmed", f"backward raised RuntimeError: {message}" + suffix
    if raised:
        return "refuted", "backward ran without error: the value requires grad at run time" + suffix
    raise Inconclusive("the backward on this line never ran with synthesized inputs")


def probe_dl501(spec, budget):
    """The tensor built on the finding's line is not a leaf, and its `.grad`
    stays None after backward."""
    seen = {}

    def after(statement):
        if isinstance(statement, ast.Assign) and isinstance(statement.targets[0], ast.Name):
            name = statement.targets[0].id
            seen["name"] = name
            return [ast.parse(f"__dl_observe__({name})").body[0]]
        return []

    def observe(value):
        if isinstance(value, torch.Tensor):
            seen["tensor"] = value
            if "first" not in seen:
                seen["first"] = (value.is_leaf, value.requires_grad)

    with watching_backward(spec) as backwards:
        run = find_working(spec, after=after, helpers={"__dl_observe__": observe}, budget=budget)
    tensor = seen.get("tensor")
    if tensor is None:
        raise Inconclusive("the tensor on this line was never built with synthesized inputs")
    name = seen.get("name", "the tensor")
    is_leaf, requires_grad = seen["first"]
    if is_leaf:
        statement = spec.get("hints", {}).get("statement") or ""
        if re.search(r"\.(to|cuda)\(", statement):
            # `.to(device)` to the device a tensor is already on returns the
            # tensor itself; the reproduction runs on the CPU only.
            raise Inconclusive(f"`{name}` stayed a leaf because `.to()` had nothing to move on the CPU; on another device it is a non-leaf copy")
        return "refuted", f"`{name}` is a leaf (is_leaf=True, requires_grad={requires_grad})" + notes(run)
    ran = "the code's backward" if any(outcome is None for outcome in backwards) else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # reading .grad of a non-leaf warns
        if ran is None and tensor.requires_grad:
            try:
                (tensor.float() * 1).sum().backward()
                ran = "a backward from it"
            except RuntimeError:
                pass
        grad = tensor.grad
    state = f"`{name}`: is_leaf=False, requires_grad={requires_grad}"
    if grad is not None:
        return "refuted", f"{state}, but its .grad holds a gradient after {ran or 'backward'} (retain_grad() keeps it)" + notes(run)
    if ran is None:
        raise Inconclusive(f"{state}; no backward ran with synthesized inputs, so .grad was never filled" + notes(run))
    return "confirmed", f"{state}; .grad None after {ran}" + notes(run)


def probe_dl204(spec, budget):
    """The edit through the detached alias, watched: the source tensor's values
    just before and just after the edit, and what the backwards that follow say."""
    match = re.search(r"also changes `([^`]+)`", spec["message"])
    if match is None:
        raise Inconclusive("the finding names no source tensor")
    source = match.group(1)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", source):
        # A detached operand saved by a product and edited later: what backward says.
        with watching_backward(spec) as backwards:
            run = find_working(spec, need_finish=True, budget=budget)
        raised = next((m for m in backwards if m and "modified by an inplace operation" in m), None)
        if raised:
            return "confirmed", f"the backward after the edit raised RuntimeError: {raised.split(' Hint:')[0]}" + notes(run)
        if backwards:
            return "refuted", "every backward after the edit ran without error" + notes(run)
        raise Inconclusive("no backward ran after the edit with synthesized inputs" + notes(run))
    seen = {}

    def snapshot(value):
        if isinstance(value, torch.Tensor) and "before" not in seen:
            seen["before"] = value.detach().clone()

    def compare(value):
        if isinstance(value, torch.Tensor) and "after" not in seen and "before" in seen:
            seen["after"] = value.detach().clone()

    def rewrite(statement):
        return ast.parse(f"__dl_before__({source})").body + [_copy(statement)]

    def after(statement):
        return ast.parse(f"__dl_after__({source})").body

    helpers = {"__dl_before__": snapshot, "__dl_after__": compare}
    with watching_backward(spec, when=lambda: "after" in seen) as backwards:
        run = find_working(spec, rewrite=rewrite, after=after, helpers=helpers, budget=budget)
    if "after" not in seen:
        if "before" in seen and run.error is not None:
            raise Inconclusive(describe_error(run.error, spec, run))
        raise Inconclusive(f"`{source}` was not a tensor when the edit ran with synthesized inputs" + notes(run))
    before, after_edit = seen["before"], seen["after"]
    raised = next((message for message in backwards if message and "modified by an inplace operation" in message), None)
    if raised:
        raised = raised.split(" Hint:")[0]
        return "confirmed", f"the edit changed `{source}` in place, and the backward after it raised RuntimeError: {raised}" + notes(run)
    if before.shape != after_edit.shape or not torch.equal(before, after_edit):
        changed = "its shape" if before.shape != after_edit.shape else (
            f"{int((before != after_edit).sum())} of its {before.numel()} values"
        )
        return "confirmed", f"the edit changed `{source}` in place ({changed})" + notes(run)
    return "refuted", f"`{source}` held the same values before and after the edit at these inputs" + notes(run)


def probe_graphless_term(spec, budget):
    """DL202 and DL303: the tensor assigned on the finding's line carries no
    graph (requires_grad False, no grad_fn), and the backward that follows
    raises "does not require grad" or runs on the loss's other terms only."""
    seen = {}

    def after(statement):
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
            name = statement.targets[0].id
            seen["name"] = name
            return [ast.parse(f"__dl_observe__({name})").body[0]]
        return []

    def observe(value):
        if isinstance(value, torch.Tensor) and "first" not in seen:
            seen["first"] = (value.requires_grad, type(value.grad_fn).__name__ if value.grad_fn else None)

    with watching_backward(spec, when=lambda: "first" in seen) as backwards:
        try:
            # Run to the end: the backward comes after the finding's line.
            run = find_working(spec, after=after, helpers={"__dl_observe__": observe}, need_finish=True, budget=budget)
        except Inconclusive:
            if "first" not in seen or not backwards:
                raise
            run = None
    suffix = notes(run) if run is not None else ""
    if "first" not in seen:
        raise Inconclusive("the value on this line was never a tensor with synthesized inputs")
    name = seen.get("name", "the value")
    requires_grad, grad_fn = seen["first"]
    if requires_grad:
        return "refuted", f"`{name}` requires grad at run time (grad_fn={grad_fn}): the graph is there" + suffix
    state = f"`{name}`: requires_grad=False, grad_fn=None"
    raised = next((message for message in backwards if message and "does not require grad" in message), None)
    if raised:
        return "confirmed", f"{state}; the backward after it raised RuntimeError: {raised}" + suffix
    if backwards:
        return "confirmed", f"{state}; the backward after it ran on the loss's other terms only, none of its gradient comes through `{name}`" + suffix
    stopped = f" ({describe_error(run.error, spec, run)})" if run is not None and run.error is not None else ""
    raise Inconclusive(f"{state}, but no backward ran after it with synthesized inputs{stopped}")


PROBES = {
    "DL101": probe_dl101,
    "DL201": probe_dl201,
    "DL202": probe_graphless_term,
    "DL203": probe_dl203,
    "DL204": probe_dl204,
    "DL206": probe_dl206,
    "DL301": probe_dl301,
    "DL302": raises_on_its_line("does not require grad"),
    "DL303": probe_graphless_term,
    "DL304": probe_dl304,
    "DL401": probe_dl401,
    "DL402": probe_dl402,
    "DL501": probe_dl501,
    "DL502": raises_on_its_line("a leaf Variable that requires grad is being used in an in-place operation"),
    "DL503": probe_dl503,
    "DL504": raises_on_its_line("you can only change requires_grad flags of leaf variables"),
}


def run(spec, budget=None):
    """Verify one finding: {"status": confirmed|refuted|inconclusive, "evidence": text}
    and, from probes that measure something drawable, "details"."""
    probe = PROBES.get(spec["code"])
    if probe is None:
        return {"status": "inconclusive", "evidence": f"no probe for {spec['code']}"}
    if spec.get("reason"):
        return {"status": "inconclusive", "evidence": spec["reason"]}
    grad_mode = torch.is_grad_enabled()
    details = None
    _BASIS["pattern"], _BASIS["stand_ins"], _BASIS["call_site"] = False, [], False
    try:
        status, evidence, *rest = probe(spec, budget)
        details = rest[0] if rest else None
    except Inconclusive as reason:
        status, evidence = "inconclusive", str(reason)
    except RecursionError:
        status, evidence = "inconclusive", "the reproduction recursed too deep"
    except MemoryError:
        status, evidence = "inconclusive", "the reproduction ran out of memory"
    finally:
        torch.set_grad_enabled(grad_mode)
    return _with_basis({"status": status, "evidence": evidence}, details, spec)


def _with_basis(result, details, spec):
    """Only the user's own code can confirm or refute: a hazard shown on a
    stand-in or on synthetic tensors is `plausible`, and a run on stand-ins
    that did not show it rules nothing out."""
    if details is not None:
        result["details"] = details
    if result["status"] == "inconclusive":
        return result
    if _BASIS["pattern"]:
        result["basis"] = "pattern"
    elif _BASIS["stand_ins"]:
        result["basis"] = "stand-in"
    else:
        result["basis"] = "user-code"
    if result["basis"] != "user-code":
        if result["status"] == "confirmed":
            result["status"] = "plausible"
        elif result["status"] == "refuted":
            result["status"] = "inconclusive"
            result["evidence"] += "; a run on stand-ins cannot rule the finding out"
    site = spec.get("call_site")
    if result["status"] == "refuted" and _BASIS["call_site"] and site and site["others"]:
        # One call's arguments did not show it; the file's other calls may.
        result["status"] = "inconclusive"
        result["evidence"] += f" (with the arguments of the call on line {site['line']}; the file calls it {site['others']} more time(s))"
    return result
