"""Input synthesis: what to pass to the user's function, and in what shape.

`Synth` builds everything one attempt needs (the file's own module classes,
with constructor arguments from a call in the file or guessed from parameter
names; optimizers, losses, loaders, batches; tensors shaped after the first
layer a value flows into). A `Plan` is one guess at what the code wants
(label kind, output width, token layout, image size) and `Spec` one tensor
to make. The readers before them (`usage_of`, `shape_usage`, `flows`,
`locate`) look at the user's function with `ast` to see how it uses a name.
"""

import ast
import collections
import inspect
import os
import re
import sys
import textwrap
import types
import weakref

import torch
from torch import nn

from detachlint.verify.runtime.standins import (
    AutoConfig,
    BATCH,
    CONFIG_NAMES,
    FEATURES,
    IMAGE,
    IMAGE_WORDS,
    LABEL_WORDS,
    Loader,
    MADE,
    MASK_WORDS,
    SEQ,
    SINK_WORDS,
    SYNTHESIZED,
    Scaler,
    Sink,
    StandIn,
    StandInLoss,
    TOKEN_WORDS,
    is_model_name,
    name_tokens,
    number_for,
    parse_at,
    walk,
)


def methods_of(class_node):
    return {s.name: s for s in class_node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}


# ---------------------------------------------------------------------------
# Reading the user's function: where a statement is, what flows where.


_BENIGN = {"to", "float", "double", "half", "long", "int", "cuda", "cpu", "contiguous", "type", "clone", "requires_grad_", "bool"}


def strip_benign(expr):
    while isinstance(expr, ast.Call):
        if isinstance(expr.func, ast.Attribute) and expr.func.attr in _BENIGN:
            expr = expr.func.value
        elif _is_variable(expr):
            expr = expr.args[0]  # the legacy `Variable(x)` wrapper: x itself
        else:
            break
    return expr


def _is_variable(call):
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    return name == "Variable" and bool(call.args)


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


# What `aliases_in` and `calls_in_order` found in a function's tree during
# the attempt running now: (kind, id) -> (the tree, kept so its id stays its
# own, what was found). Synthesis asks again and again of the same functions;
# the trees no longer change once the attempt's module is built, and a new
# attempt (new trees) starts with it empty (`forget_analyses`).
_ANALYSES = {}


def forget_analyses():
    _ANALYSES.clear()


def _analysed(kind, node, analyse):
    key = (kind, id(node))
    found = _ANALYSES.get(key)
    if found is None or found[0] is not node:
        found = _ANALYSES[key] = (node, analyse(node))
    return found[1]


def aliases_in(function):
    """name -> the expression last assigned to it (pairs of tuple assignments too)."""
    return dict(_analysed("aliases", function, _aliases_in))


def _aliases_in(function):
    aliases = {}
    for node in walk(function):
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
            and _constant_key(e.slice) == key
            and type(_constant_key(e.slice)) is type(key)
        )

    return matches


def _constant_key(node):
    """The key a constant subscript reads: `x["image"]`, `x[0]`, and a tuple
    key with a string in it (`x[("color", 0, 0)]`, never a tensor's `x[0, 1]`); None otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Tuple) and all(isinstance(e, ast.Constant) for e in node.elts):
        value = tuple(e.value for e in node.elts)
        if any(isinstance(v, str) for v in value):
            return value
    return None


def _key_name(key):
    """A name to read a dict key by: the key, or the words of a tuple key."""
    if isinstance(key, tuple):
        return "_".join(str(part) for part in key if isinstance(part, str)) or "value"
    return str(key)


def attr_matcher(owner, attr):
    return lambda e: isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == owner and e.attr == attr


def calls_in_order(function):
    return list(_analysed("calls", function, _calls_in_order))


def _calls_in_order(function):
    calls = [n for n in walk(function) if isinstance(n, ast.Call)]
    return sorted(calls, key=lambda c: (c.lineno, c.col_offset))


def flows(function, matches, sliced=False):
    """(call, position) for each call whose positional argument is the value;
    with `sliced`, for each call whose argument is a slice of it (`x[:, :-1]`)."""
    aliases = aliases_in(function)
    found = []
    for call in calls_in_order(function):
        for position, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred) or (sliced and _sliced(arg) is arg):
                continue
            if is_value(_sliced(arg) if sliced else arg, matches, aliases):
                found.append((call, position))
    return found


def _sliced(expr):
    """`x` of `x[:, :-1]`: a slice keeps what the value is (token ids stay
    ids below the vocabulary an embedding has); an index picks something else."""
    if isinstance(expr, ast.Subscript):
        parts = expr.slice.elts if isinstance(expr.slice, ast.Tuple) else [expr.slice]
        if parts and all(isinstance(p, ast.Slice) for p in parts):
            return expr.value
    return expr


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
    if isinstance(expr, ast.Subscript) and _constant_key(expr.slice) is not None:
        # `self.models["encoder"]`: an entry of a dict or list of modules.
        owner = resolve(expr.value, env)
        if isinstance(owner, (dict, list, tuple, nn.ModuleDict, nn.ModuleList, nn.Sequential)):
            try:
                return owner[_constant_key(expr.slice)]
            except Exception:
                return None
    return None


def usage_of(function, name):
    """How a function uses one of its parameters."""
    usage = {"call_unpacked": 0, "called": False, "iterated": False, "methods": set(), "keys": [], "indexes": 0, "unpacked": 0, "attrs": set()}
    for node in walk(function):
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
            key = _constant_key(node.slice)
            if isinstance(key, (str, tuple)):
                # `batch["image"]`, and `inputs[("color", 0, 0)]`, a key of several parts.
                if key not in usage["keys"]:
                    usage["keys"].append(key)
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
    for node in walk(function):
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
                if any(isinstance(n, ast.Name) and n.id == name for n in walk(index)):
                    indexes = True
        dims = max(dims, _dims_read(node, name))
    return dims, indexes


def _is_shape_of(expr, name):
    """`x.shape` or `x.size()`."""
    if isinstance(expr, ast.Call) and not expr.args and isinstance(expr.func, ast.Attribute) and expr.func.attr == "size":
        expr = expr.func
    elif not (isinstance(expr, ast.Attribute) and expr.attr == "shape"):
        return False
    return isinstance(expr.value, ast.Name) and expr.value.id == name


def _dims_read(node, name):
    """The dimensions one statement or expression says `name` has: a
    subscript of several indices (`x[:, :, t]`), an unpacked shape
    (`c, h, w = x.shape`, `b, t, e, h = *x.shape, heads`); 0 when it says none."""
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == name and isinstance(node.slice, ast.Tuple):
        parts = node.slice.elts
        if any(isinstance(p, ast.Starred) or (isinstance(p, ast.Constant) and (p.value is Ellipsis or isinstance(p.value, str))) for p in parts):
            return 0  # `x[..., 0]` fixes no count; a string makes it a dict key
        return sum(1 for p in parts if not (isinstance(p, ast.Constant) and p.value is None))
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], (ast.Tuple, ast.List)):
        targets = node.targets[0].elts
        if any(isinstance(t, ast.Starred) for t in targets):
            return 0
        if _is_shape_of(node.value, name):
            return len(targets)
        if isinstance(node.value, (ast.Tuple, ast.List)):
            starred = [e for e in node.value.elts if isinstance(e, ast.Starred)]
            if len(starred) == 1 and _is_shape_of(starred[0].value, name):
                return max(len(targets) - (len(node.value.elts) - 1), 0)
    return 0


def _indexes_with(function, name):
    """Whether `name` is an index of a subscript (`logp[rows, actions]`, `table[idx]`)."""
    for node in walk(function):
        if isinstance(node, ast.Subscript):
            elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if any(isinstance(e, ast.Name) and e.id == name for e in elements):
                return True
    return False


def _counts_with(function, name):
    """Whether the function counts with `name`: `range(n)`, `range(power - 1)`."""
    for node in walk(function):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
            for arg in node.args:
                parts = [arg]
                while parts:
                    part = parts.pop()
                    if isinstance(part, ast.Name) and part.id == name:
                        return True
                    if isinstance(part, ast.BinOp):
                        parts += [part.left, part.right]
    return False


# Calls whose plain arguments are sizes: `torch.zeros(batch_sz)`, `x.view(bsz, -1)`.
_SIZE_TAKERS = {"zeros", "ones", "empty", "randn", "rand", "arange", "full", "new_zeros", "new_ones", "new_empty", "new_full", "view", "reshape", "expand", "repeat", "randint", "eye", "linspace"}


def _sizes_with(function, name):
    """Whether the function gives `name` as a size (`torch.zeros(batch_sz)`,
    `h.view(bsz, -1)`, `torch.zeros((n, 4))`): an int, never a tensor."""
    for node in walk(function):
        if not (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))):
            continue
        called = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
        if called not in _SIZE_TAKERS:
            continue
        for arg in node.args[: 1 if called in ("full", "new_full", "randint") else None]:
            parts = list(arg.elts) if isinstance(arg, (ast.Tuple, ast.List)) else [arg]
            if any(isinstance(p, ast.Name) and p.id == name for p in parts):
                return True
    return False


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
    for node in walk(function):
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
        elif isinstance(node, (ast.For, ast.comprehension)):
            target = _zipped_target(node.iter, node.target, name)
            if target is not None:
                found.append(target)
    return found


def _zipped_target(iterable, target, name):
    """The part of a loop's target that takes `name`'s items when the loop
    goes over `zip(..., name, ...)` (also through `enumerate`):
    `(x2, _)` in `for i, ((x1, _), (x2, _)) in enumerate(zip(a, b))`."""
    if isinstance(iterable, ast.Call) and _call_name(iterable) == "enumerate" and iterable.args:
        if not (isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == 2):
            return None
        iterable, target = iterable.args[0], target.elts[1]
    if not (isinstance(iterable, ast.Call) and _call_name(iterable) == "zip" and not iterable.keywords):
        return None
    if not isinstance(target, (ast.Tuple, ast.List)) or len(target.elts) != len(iterable.args):
        return None
    positions = [i for i, a in enumerate(iterable.args) if _iterates(a, name)]
    return target.elts[positions[0]] if len(positions) == 1 else None


# ---------------------------------------------------------------------------
# Synthesis: arguments, instances, inputs.


class Plan:
    """One guess at what the code wants, varied between attempts."""

    def __init__(self, labels="long", out=4, tokens="seq", spatial=32, force=False, call_site=False, caller=None, ctor=0, site=0, program=0):
        self.labels, self.out, self.tokens, self.spatial, self.force = labels, out, tokens, spatial, force
        self.program = program  # with call_site: which of the program's own entry calls (`main()`), from 1
        self.call_site = call_site  # run the file's own call of the code instead of synthesizing its arguments
        self.caller = caller  # run this method of the class, which calls the target method with what it builds
        self.ctor = ctor  # which of the file's own constructor calls of a class to try first
        self.site = site  # with call_site: which of the file's calls (0 the first, then its alternatives)

    def but(self, **changes):
        values = dict(labels=self.labels, out=self.out, tokens=self.tokens, spatial=self.spatial, force=self.force, call_site=self.call_site, caller=self.caller, ctor=self.ctor, site=self.site, program=self.program)
        values.update(changes)
        return Plan(**values)

    def describe(self):
        return f"labels={self.labels} out={self.out} tokens={self.tokens} spatial={self.spatial} force={self.force} call_site={self.call_site} caller={self.caller} ctor={self.ctor} site={self.site} program={self.program}"


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
        if self.kind == "ones":
            return torch.ones(self.shape, dtype=torch.long)
        if self.kind == "full":
            return torch.full(self.shape, int(self.high), dtype=torch.long)
        if self.kind == "nonblank":
            # Labels a CTC loss takes: 0 is its blank.
            return torch.randint(1, max(int(self.high), 2), self.shape)
        if self.kind == "probs":
            return torch.randn(self.shape).softmax(-1)
        if self.kind == "log_probs":
            return torch.randn(self.shape).log_softmax(-1)
        if self.kind == "labels_float":
            return torch.randint(0, 2, self.shape).float()
        return torch.randn(self.shape)

    def make(self):
        if self.kind == "packed":
            # A packed batch (`pad_packed_sequence(inputs)`): `shape` is the padded
            # (batch, time, features), every sequence full length.
            padded = torch.randn(self.shape)
            packed = nn.utils.rnn.pack_padded_sequence(padded, [self.shape[1]] * self.shape[0], batch_first=True)
            SYNTHESIZED[id(packed.data)] = weakref.ref(packed.data)
            MADE[0] += 1
            return packed
        tensor = self._make()
        SYNTHESIZED[id(tensor)] = weakref.ref(tensor)
        MADE[0] += 1
        return tensor


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


# ---------------------------------------------------------------------------
# Layer chains: the layers a value goes through, in the order the code calls
# them, and the input they imply (channels, spatial size, features).


_CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_CONV_T = (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
_MAX_POOL = (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d)
_AVG_POOL = (nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d)
_ADAPTIVE = (
    nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d,
    nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d,
)
_PADS = (
    nn.ZeroPad2d, nn.ConstantPad1d, nn.ConstantPad2d, nn.ConstantPad3d, nn.ReflectionPad1d,
    nn.ReflectionPad2d, nn.ReplicationPad1d, nn.ReplicationPad2d, nn.ReplicationPad3d,
)
# Layers that keep the shape of what they are given.
_SAME_SHAPE = (
    nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d,
    nn.GroupNorm, nn.LocalResponseNorm, nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout,
    nn.Identity, nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.PReLU, nn.ELU, nn.SELU, nn.CELU, nn.GELU, nn.SiLU, nn.Mish,
    nn.Sigmoid, nn.Tanh, nn.Hardtanh, nn.Hardswish, nn.Hardsigmoid, nn.Softplus, nn.Softmax, nn.LogSoftmax,
    nn.Softmax2d, nn.Tanhshrink, nn.Softsign, nn.Threshold,
)
# Layers whose input size is what the chain is read for.
_SIZED = (nn.Linear, nn.Bilinear, nn.Embedding, nn.EmbeddingBag, nn.RNNBase, nn.MultiheadAttention, nn.LayerNorm)
_POOL_FUNCTIONS = {
    "max_pool1d": 1, "max_pool2d": 2, "max_pool3d": 3, "avg_pool1d": 1, "avg_pool2d": 2, "avg_pool3d": 3,
}
_ADAPTIVE_FUNCTIONS = {
    "adaptive_avg_pool1d": 1, "adaptive_avg_pool2d": 2, "adaptive_avg_pool3d": 3,
    "adaptive_max_pool1d": 1, "adaptive_max_pool2d": 2, "adaptive_max_pool3d": 3,
}
# Functions and tensor methods that keep the shape of their first argument.
_SAME_SHAPE_CALLS = {
    "relu", "relu_", "relu6", "leaky_relu", "gelu", "silu", "elu", "selu", "celu", "mish", "sigmoid", "tanh",
    "hardtanh", "hardswish", "softplus", "softmax", "log_softmax", "dropout", "dropout1d", "dropout2d",
    "dropout3d", "normalize", "float", "double", "half", "contiguous", "clone", "detach", "to", "cuda", "cpu",
    "type", "abs", "exp", "clamp", "clamp_", "sqrt", "neg", "batch_norm", "instance_norm", "group_norm",
    "local_response_norm", "requires_grad_", "mul", "add", "sub", "div", "pow", "Variable",
}
# Sizes tried for an image side, after the plan's own: the common ones first.
_COMMON_SIDES = (28, 32, 64, 84, 96, 128, 224, 16, 8)


def _const_int(expr, env):
    """The integer an expression of literals and `self.x` attributes evaluates to; None if unknown."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, int) and not isinstance(expr.value, bool):
        return expr.value
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.USub):
        value = _const_int(expr.operand, env)
        return None if value is None else -value
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Mult, ast.Add, ast.Sub, ast.FloorDiv)):
        left, right = _const_int(expr.left, env), _const_int(expr.right, env)
        if left is None or right is None or (isinstance(expr.op, ast.FloorDiv) and right == 0):
            return None
        if isinstance(expr.op, ast.Mult):
            return left * right
        if isinstance(expr.op, ast.Add):
            return left + right
        if isinstance(expr.op, ast.Sub):
            return left - right
        return left // right
    if isinstance(expr, ast.Attribute):
        value = resolve(expr, env)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def _batch_dim(expr, env):
    """`x.size(0)`, `x.shape[0]`, `len(x)`, a batch-size name: the first dimension kept as is."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "size":
        return bool(expr.args) and isinstance(expr.args[0], ast.Constant) and expr.args[0].value == 0
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Attribute) and expr.value.attr == "shape":
        return isinstance(expr.slice, ast.Constant) and expr.slice.value == 0
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "len":
        return True
    if isinstance(expr, (ast.Name, ast.Attribute)):
        name = expr.id if isinstance(expr, ast.Name) else expr.attr
        return bool({"batch", "bs", "b", "n", "bsz", "size"} & set(name_tokens(name)))
    return False


def _view_op(call, env):
    """The op of `x.view(...)`/`x.reshape(...)`: a flatten keeping the batch, or a
    flatten to a fixed number of features (`view(-1, 16 * 5 * 5)`)."""
    args = list(call.args)
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = list(args[0].elts)
    if len(args) > 2:
        # `view(-1, 28, 28)`: the batch, then fixed sizes; an input of that very shape gives it.
        first, rest = _const_int(args[0], env), [_const_int(a, env) for a in args[1:]]
        if (first == -1 or _batch_dim(args[0], env)) and all(r is not None and r > 0 for r in rest):
            return ("sizes", tuple(rest))
        return ("unknown",)
    if len(args) != 2:
        return ("unknown",)
    first, second = _const_int(args[0], env), _const_int(args[1], env)
    if second == -1 and (first is not None or _batch_dim(args[0], env)):
        return ("flatten",)
    if second is not None and second > 0 and (first == -1 or _batch_dim(args[0], env)):
        return ("features", second)
    return ("unknown",)


def _call_name(call):
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def _argument(call, position, keyword, env, default=None):
    for kw in call.keywords:
        if kw.arg == keyword:
            return _const_tuple(kw.value, env, default)
    if len(call.args) > position:
        return _const_tuple(call.args[position], env, default)
    return default


def _const_tuple(expr, env, default):
    if isinstance(expr, (ast.Tuple, ast.List)):
        values = [_const_int(e, env) for e in expr.elts]
        return tuple(values) if None not in values else default
    if isinstance(expr, ast.Constant) and expr.value is None:
        return default
    value = _const_int(expr, env)
    return default if value is None else value


class Chain:
    """Reads, from the user's code, the ops a value goes through in order:
    ("layer", module), ("pool", dims, kernel, stride, padding), ("adaptive",
    dims, size), ("flatten",), ("features", n), ("unknown",). Reading stops
    at the first layer that fixes the input's size (a Linear, an Embedding,
    an RNN) or at an op it cannot follow."""

    def __init__(self, class_ast_of, limit=64):
        self.class_ast_of = class_ast_of
        self.limit = limit

    def of_module(self, module, depth=0):
        if depth > 6 or isinstance(module, StandIn):
            return [("unknown",)]
        if isinstance(module, nn.Sequential):
            ops = []
            for child in module:
                ops += self.of_module(child, depth + 1)
                if _chain_done(ops):
                    break
            return ops
        node = self.class_ast_of(module) if self.class_ast_of is not None else None
        forward = methods_of(node).get("forward") if node is not None else None
        if forward is not None:
            names = [a.arg for a in forward.args.args][1:]
            if not names:
                return [("unknown",)]
            # What forward returns is the module's output: the caller goes on from it.
            return _returned(self.of_function(forward, name_matcher(names[0]), {"self": module}, depth + 1, returns=True))
        if isinstance(module, nn.Flatten):
            return [("flatten",)] if module.start_dim == 1 else [("unknown",)]
        if type(module).__module__.startswith("torch.nn"):
            return [("layer", module)]
        return [("unknown",)]

    def of_function(self, function_ast, matches, env, depth=0, returns=False):
        """The ops the value `matches` picks goes through in `function_ast`;
        with `returns`, a `return` of it ends them with ("return",)."""
        outer = getattr(self, "_scope", None)
        self._scope = function_ast
        try:
            return self._statements(function_ast, matches, dict(_local_modules(function_ast, env), **env), depth, returns)
        finally:
            self._scope = outer

    def _statements(self, function_ast, matches, env, depth, returns):
        ops = []
        statements = sorted(
            (n for n in walk(function_ast) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Return, ast.Expr))),
            key=lambda n: (n.lineno, n.col_offset),
        )
        current = matches
        for statement in statements:
            value = getattr(statement, "value", None)
            if value is None:
                continue
            targets = statement.targets if isinstance(statement, ast.Assign) else [getattr(statement, "target", None)]
            if (
                len(targets) == 1 and isinstance(targets[0], ast.Tuple) and isinstance(value, ast.Tuple)
                and len(targets[0].elts) == len(value.elts) and not any(isinstance(e, ast.Starred) for e in value.elts)
            ):
                # `x_v, y_v = Variable(x), Variable(y)`: the pair the value is in.
                pairs = [(t, self._expression(v, current, env, depth)) for t, v in zip(targets[0].elts, value.elts)]
                pairs = [(t, f) for t, f in pairs if f is not None]
                if not pairs:
                    continue
                found = pairs[0][1]
                targets = [pairs[0][0]] if len(pairs) == 1 else [None]
            else:
                found = self._expression(value, current, env, depth)
            if found is None:
                continue
            ops += found
            if _chain_done(ops) or len(ops) > self.limit:
                return ops
            if returns and isinstance(statement, ast.Return):
                return ops + [("return",)]
            if isinstance(statement, (ast.Return, ast.Expr)) or len(targets) != 1 or not isinstance(targets[0], ast.Name):
                return ops + [("unknown",)]
            current = name_matcher(targets[0].id)
        return ops + [("unknown",)]

    def _expression(self, expr, matches, env, depth):
        """The ops from the value to the result of `expr`; None when `expr` does not use it
        (reading its size, `x.size(0)`, does not count as a use)."""
        if matches(expr):
            return []
        if _reads_size(expr, matches):
            return None
        if isinstance(expr, ast.Attribute) and expr.attr == "data":
            return self._expression(expr.value, matches, env, depth)
        if isinstance(expr, ast.IfExp):
            # `x.cuda() if cuda else x`: either branch keeps the value's shape.
            for side in (expr.body, expr.orelse):
                inner = self._expression(side, matches, env, depth)
                if inner is not None:
                    return inner
        if isinstance(expr, ast.Subscript):
            inner = self._expression(expr.value, matches, env, depth)
            if inner is not None:
                return inner if _chain_done(inner) else inner + [_index_op(expr.slice, getattr(self, "_scope", None), env)]
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp)):
            # `[self.fc(x[:, t]) for t in range(T)]`: what each element does to the value.
            inner = self._expression(expr.elt, matches, env, depth)
            if inner is not None:
                return inner if _chain_done(inner) else inner + [("unknown",)]
        if isinstance(expr, ast.Call) and _call_name(expr) in _CATS and expr.args and isinstance(expr.args[0], (ast.List, ast.Tuple)):
            for element in expr.args[0].elts:
                inner = self._expression(element, matches, env, depth)
                if inner is not None:
                    return inner if _chain_done(inner) else inner + [_cat_op(expr, element, env)]
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Attribute) and not isinstance(resolve(func.value, env), nn.Module):
                inner = self._expression(func.value, matches, env, depth)
                if inner is not None:
                    return inner + [self._method(func.attr, expr, env)]
            for position, arg in enumerate(expr.args):
                inner = self._expression(arg, matches, env, depth)
                if inner is not None:
                    return inner + self._call(expr, position, env, depth)
            for keyword in expr.keywords:
                if self._expression(keyword.value, matches, env, depth) is not None:
                    return [("unknown",)]
            return None
        if isinstance(expr, ast.BinOp):
            # `x / 255.0 - 0.5`, `x + residual`: the shape of the value.
            for side in (expr.left, expr.right):
                inner = self._expression(side, matches, env, depth)
                if inner is not None:
                    return inner if not isinstance(expr.op, ast.MatMult) else inner + [("unknown",)]
            return None
        if isinstance(expr, ast.UnaryOp):
            return self._expression(expr.operand, matches, env, depth)
        for child in ast.iter_child_nodes(expr):
            if isinstance(child, ast.expr) and self._expression(child, matches, env, depth) is not None:
                return [("unknown",)]
        return None

    def _method(self, name, call, env):
        if name in ("view", "reshape"):
            return _view_op(call, env)
        if name == "flatten":
            start = _argument(call, 0, "start_dim", env, 0)
            return ("flatten",) if start == 1 else ("unknown",)
        if name in _SAME_SHAPE_CALLS:
            return ("same",)
        if name == "permute":
            order = [_const_int(a, env) for a in (call.args[0].elts if len(call.args) == 1 and isinstance(call.args[0], (ast.Tuple, ast.List)) else call.args)]
            if order and None not in order and sorted(o % len(order) for o in order) == list(range(len(order))):
                return ("permute", tuple(o % len(order) for o in order))
        if name in ("transpose", "swapaxes") and len(call.args) == 2:
            first, second = _const_int(call.args[0], env), _const_int(call.args[1], env)
            if first is not None and second is not None and first >= 0 and second >= 0:
                return ("transpose", first, second)
        if name == "unsqueeze" and len(call.args) == 1:
            where = _const_int(call.args[0], env)
            if where is not None and where >= 0:
                return ("index", (("keep",),) * where + (("new",),))
        return ("unknown",)

    def _call(self, call, position, env, depth):
        callee = _module_called(resolve(call.func, env))
        if isinstance(callee, nn.Module) and position == 0:
            return self.of_module(callee, depth + 1)
        if isinstance(callee, nn.Module):
            # A later input of the user's module: its parameter in forward.
            forward = method_ast(self.class_ast_of, callee, "forward") if depth < 6 else None
            names = [a.arg for a in forward.args.args][1:] if forward is not None else []
            if position < len(names):
                return _returned(self.of_function(forward, name_matcher(names[position]), {"self": callee}, depth + 1, returns=True))
            return [("unknown",)]
        if isinstance(callee, ast.Lambda) and depth < 6:
            # `f = lambda v: self(v) ** 2; f(x)`: the lambda's body, on its parameter.
            names = [a.arg for a in callee.args.args]
            if position >= len(names):
                return [("unknown",)]
            body = ast.Module(body=[ast.copy_location(ast.Return(callee.body), callee.body)], type_ignores=[])
            return _returned(self.of_function(body, name_matcher(names[position]), env, depth + 1, returns=True))
        name = _call_name(call)
        func = call.func
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
            and "self" in env
            and self.class_ast_of is not None
        ):
            method = method_ast(self.class_ast_of, env["self"], name)
            if method is not None and depth < 6:
                names = [a.arg for a in method.args.args][1:]
                if position < len(names):
                    return _returned(self.of_function(method, name_matcher(names[position]), env, depth + 1, returns=True))
                return [("unknown",)]
        if position != 0:
            return [("unknown",)]
        if name in _POOL_FUNCTIONS:
            kernel = _argument(call, 1, "kernel_size", env)
            stride = _argument(call, 2, "stride", env, kernel)
            padding = _argument(call, 3, "padding", env, 0)
            if kernel is None:
                return [("unknown",)]
            return [("pool", _POOL_FUNCTIONS[name], kernel, stride, padding)]
        if name in _ADAPTIVE_FUNCTIONS:
            size = _argument(call, 1, "output_size", env)
            return [("adaptive", _ADAPTIVE_FUNCTIONS[name], size)] if size is not None else [("unknown",)]
        if name == "flatten":
            start = _argument(call, 1, "start_dim", env, 0)
            return [("flatten",)] if start == 1 else [("unknown",)]
        if name in _SAME_SHAPE_CALLS:
            return [("same",)]
        return [("unknown",)]


# Concatenations: along the batch they keep the shape; along the last
# dimension a later layer's width is the parts' sum.
_CATS = {"cat", "concat", "concatenate"}


def _returned(ops):
    """The ops of a callee the caller goes on from: a `return` of the value continues."""
    return ops[:-1] if ops and ops[-1][0] == "return" else ops


def method_ast(class_ast_of, obj, name):
    """`name`'s def in the class of `obj`, or in the first base class of the
    user's file that has it (a method an agent inherits); None otherwise."""
    node = class_ast_of(obj) if class_ast_of is not None else None
    method = methods_of(node).get(name) if node is not None else None
    by_type = getattr(getattr(class_ast_of, "__self__", None), "class_ast_of_type", None)
    if method is not None or by_type is None:
        return method
    for klass in type(obj).__mro__[1:]:
        base = by_type(klass)
        if base is not None and name in methods_of(base):
            return methods_of(base)[name]
    return None


def _local_modules(function_ast, env):
    """Local names the function binds to the user's modules and lambdas:
    `for layer in self.layers` (the first layer), `f = lambda v: ...`,
    `net = copy.deepcopy(model)`, `enc = self.encoder`."""
    found = {}
    for node in walk(function_ast):
        if isinstance(node, ast.For):
            target, iterable = node.target, node.iter
            if isinstance(iterable, ast.Call) and _call_name(iterable) == "enumerate" and iterable.args and isinstance(target, ast.Tuple) and len(target.elts) == 2:
                target, iterable = target.elts[1], iterable.args[0]
            layers = resolve(iterable, env)
            if isinstance(target, ast.Name) and isinstance(layers, (nn.ModuleList, nn.Sequential)) and len(layers):
                found.setdefault(target.id, layers[0])
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Lambda):
                found.setdefault(node.targets[0].id, value)
                continue
            if isinstance(value, ast.Call) and _call_name(value) in ("deepcopy", "copy") and len(value.args) == 1:
                value = value.args[0]
            module = resolve(strip_benign(value), env)
            if isinstance(module, nn.Module):
                found.setdefault(node.targets[0].id, module)
    return found


def _scalar_index(expr, scope, env, depth=0):
    """Whether an index is one number (it takes a dimension away): a literal,
    a `range` loop's variable, a size, arithmetic of those."""
    if depth > 8:
        return False
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, int) and not isinstance(expr.value, bool)
    if isinstance(expr, ast.UnaryOp):
        return _scalar_index(expr.operand, scope, env, depth + 1)
    if isinstance(expr, ast.BinOp):
        return _scalar_index(expr.left, scope, env, depth + 1) and _scalar_index(expr.right, scope, env, depth + 1)
    if isinstance(expr, ast.IfExp):
        return _scalar_index(expr.body, scope, env, depth + 1) and _scalar_index(expr.orelse, scope, env, depth + 1)
    if isinstance(expr, ast.Attribute):
        value = resolve(expr, env)
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(expr, ast.Subscript):
        # `x.size()[1]`, `x.shape[0]`
        inner = expr.value
        return (isinstance(inner, ast.Attribute) and inner.attr == "shape") or (isinstance(inner, ast.Call) and _call_name(inner) == "size")
    if isinstance(expr, ast.Call):
        return _call_name(expr) in ("len", "int", "size", "min", "max") and not (_call_name(expr) in ("min", "max") and not expr.args)
    if isinstance(expr, ast.Name) and scope is not None:
        for node in walk(scope):
            if isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name) and node.target.id == expr.id:
                return isinstance(node.iter, ast.Call) and _call_name(node.iter) == "range"
        value = aliases_in(scope).get(expr.id)
        return value is not None and not (isinstance(value, ast.Name) and value.id == expr.id) and _scalar_index(value, scope, env, depth + 1)
    return False


def _index_op(index, scope, env):
    """("index", pattern) of a subscript: per element "keep" (a slice), "drop"
    (one number) with the literal, "new" (None), "ellipsis"; ("unknown",) for
    tensor indexes and masks."""
    elements = index.elts if isinstance(index, ast.Tuple) else [index]
    pattern = []
    for element in elements:
        if isinstance(element, ast.Slice):
            pattern.append(("keep",))
        elif isinstance(element, ast.Constant) and element.value is None:
            pattern.append(("new",))
        elif isinstance(element, ast.Constant) and element.value is Ellipsis:
            pattern.append(("ellipsis",))
        elif _scalar_index(element, scope, env):
            pattern.append(("drop", _const_int(element, env)))
        else:
            return ("unknown",)
    if sum(1 for p in pattern if p[0] == "ellipsis") > 1:
        return ("unknown",)
    return ("index", tuple(pattern))


def _cat_op(call, element, env):
    """The op of a concatenation the value is one part of: ("same",) along the
    batch, ("cat", known width of the other parts, parts of unknown width)
    along the last dimension."""
    dim = _argument(call, 1, "dim", env, 0)
    if dim == 0:
        return ("same",)
    if not isinstance(dim, int) or dim < -1:
        return ("unknown",)
    known, unknown, ndim = 0, 0, None
    for other in call.args[0].elts:
        value = resolve(other, env) if other is not element else None
        if isinstance(value, torch.Tensor) and value.dim() >= 1:
            if (dim != -1 and value.dim() != dim + 1) or ndim not in (None, value.dim()):
                return ("unknown",)
            known, ndim = known + value.shape[-1], value.dim()
        else:
            unknown += 1
    return ("cat", dim, known, unknown, ndim)


def _free_spec(ops):
    """(spec, fixed) of a first layer that reads only its last dimensions (a
    Linear takes [..., in]: `fixed` 1; an Embedding takes any shape: 0); None otherwise."""
    rest = [o for o in ops if o[0] != "same"]
    layer = rest[0][1] if rest and rest[0][0] == "layer" else None
    if isinstance(layer, nn.Linear):
        return Spec("float", (BATCH, layer.in_features)), 1
    if isinstance(layer, nn.Bilinear):
        return Spec("float", (BATCH, layer.in1_features)), 1
    if isinstance(layer, nn.LayerNorm):
        return Spec("float", (BATCH,) + tuple(layer.normalized_shape)), len(layer.normalized_shape)
    if isinstance(layer, nn.Embedding):
        return Spec("long", (BATCH,), layer.num_embeddings), 0
    return None


def _leading(count):
    return (BATCH,) + (SEQ,) * (count - 1) if count > 0 else ()


def _undo(op, ops, spatial):
    """The input that gives, after the reshaping `op` (a subscript, permute,
    transpose, concatenation), what the rest of the chain `ops` takes; None
    when the rest does not say."""
    free = _free_spec(ops)
    if free is None:
        spec = chain_input(ops, spatial)
        if spec is None:
            return None
        shape, fixed = spec.shape, None
    else:
        spec, fixed = free
        shape = spec.shape[len(spec.shape) - fixed:]
    kind = op[0]
    if kind == "cat":
        _, dim, known, unknown, ndim = op
        if fixed is not None:
            if fixed != 1:
                return None
            shape = _leading((ndim or (dim + 1 if dim >= 0 else 2)) - 1) + tuple(shape)
        if not shape or unknown < 1 or dim not in (-1, len(shape) - 1) or shape[-1] <= known or (shape[-1] - known) % unknown:
            return None
        return Spec(spec.kind, tuple(shape[:-1]) + ((shape[-1] - known) // unknown,), spec.high)
    if kind in ("permute", "transpose"):
        n = len(op[1]) if kind == "permute" else max(op[1], op[2], (fixed or 0)) + 1
        if kind == "transpose":
            order = list(range(n))
            order[op[1]], order[op[2]] = op[2], op[1]
        else:
            order = list(op[1])
        if fixed is not None:
            if n < len(shape):
                return None
            # Free leading dimensions: the one that lands first in the input is the batch.
            sizes = [SEQ] * (n - len(shape))
            if order.index(0) < len(sizes):
                sizes[order.index(0)] = BATCH
            shape = tuple(sizes) + tuple(shape)
        if len(shape) != n:
            return None
        source = [None] * n
        for position, taken in enumerate(order):
            source[taken] = shape[position]
        return Spec(spec.kind, tuple(source), spec.high)
    if kind != "index":
        return None
    pattern = op[1]
    cut = next((i for i, p in enumerate(pattern) if p[0] == "ellipsis"), None)
    before = pattern if cut is None else pattern[:cut]
    after = () if cut is None else pattern[cut + 1:]
    if fixed is not None:
        kept = sum(1 for p in before + after if p[0] in ("keep", "new"))
        shape = _leading(kept + (1 if cut is not None and fixed == 0 else 0)) + tuple(shape)
    source, at = [], 0
    for element in before:
        if element[0] == "drop":
            number = element[1] if element[1] is not None else 0
            source.append(max(BATCH if not source else SEQ, number + 1 if number >= 0 else -number))
            continue
        if at >= len(shape) or (element[0] == "new" and shape[at] != 1 and fixed is None):
            return None
        if element[0] == "keep":
            source.append(shape[at])
        at += 1
    tail = []
    end = len(shape)
    for element in reversed(after):
        if element[0] == "drop":
            number = element[1] if element[1] is not None else 0
            tail.insert(0, max(SEQ, number + 1 if number >= 0 else -number))
            continue
        if end <= at:
            return None
        end -= 1
        if element[0] == "keep":
            tail.insert(0, shape[end])
    return Spec(spec.kind, tuple(source) + tuple(shape[at:end]) + tuple(tail), spec.high)


_SIZE_ATTRS = {"shape", "device", "dtype", "ndim", "is_cuda", "requires_grad"}
# `x.new_zeros(b, n)` reads only the dtype and device of `x`.
_NEW_LIKE = ("new_zeros", "new_ones", "new_full", "new_empty", "new_tensor")


def _reads_size(expr, matches):
    if isinstance(expr, ast.Attribute) and expr.attr in _SIZE_ATTRS:
        return matches(_data_of(expr.value))
    if isinstance(expr, ast.Call):
        func = expr.func
        if isinstance(func, ast.Attribute) and func.attr in ("size", "dim", "numel", "ndimension", "get_device") + _NEW_LIKE:
            return matches(_data_of(func.value))
        if isinstance(func, ast.Name) and func.id == "len" and expr.args:
            return matches(expr.args[0])
    return False


def _data_of(expr):
    """`x.data` reads the same sizes as `x`."""
    return expr.value if isinstance(expr, ast.Attribute) and expr.attr == "data" else expr


# Products of the value with a tensor of the user's (`x @ self.weight`,
# `torch.cdist(x, self.codebook.weight)`): the last dimension it must have.
_PRODUCTS = {"matmul": "rows", "mm": "rows", "cdist": "columns", "linear": "columns"}


def _weight_shape(expr, env):
    """The shape of the user's tensor an expression names (`self.w.data`, `self.w.t()`)."""
    if isinstance(expr, ast.Attribute) and expr.attr in ("data", "T"):
        shape = _weight_shape(expr.value, env)
        return tuple(reversed(shape)) if shape is not None and expr.attr == "T" else shape
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and not expr.args and expr.func.attr in ("t", "detach", "clone"):
        shape = _weight_shape(expr.func.value, env)
        return tuple(reversed(shape)) if shape is not None and expr.func.attr == "t" else shape
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant):
        # `self.vars[0]`, `params["fc1.weight"]`: one of a list or dict of the user's weights.
        owner = resolve(expr.value, env)
        try:
            value = owner[expr.slice.value] if owner is not None else None
        except (KeyError, IndexError, TypeError):
            value = None
    else:
        value = resolve(expr, env)
    if isinstance(value, torch.Tensor) and value.dim() in (1, 2):
        return tuple(value.shape)
    return None


def product_spec(function_ast, matches, env):
    """The input a product with one of the user's weights implies: (batch, k)
    where `k` is what the weight takes."""
    if function_ast is None:
        return None
    aliases = aliases_in(function_ast)
    # `h = torch.sparse.mm(adj, h)`: a product assigned back to its right operand.
    recurrent = {
        id(n.value): n.targets[0].id for n in walk(function_ast)
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
    }
    for node in walk(function_ast):
        pair, how = None, None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult):
            pair, how = (node.left, node.right), "rows"
        elif isinstance(node, ast.Call) and _call_name(node) in _PRODUCTS:
            how = _PRODUCTS[_call_name(node)]
            func = node.func
            if len(node.args) >= 2:
                pair = (node.args[0], node.args[1])
            elif len(node.args) == 1 and isinstance(func, ast.Attribute) and how == "rows":
                pair = (func.value, node.args[0])
        if pair is None:
            continue
        left, right = (_unwrapped(side) for side in pair)
        if how == "rows" and not is_value(left, matches, aliases) and is_value(right, matches, aliases):
            # `adj @ x` with the user's (or an argument's) `adj` of shape (r, k): x is (k, n).
            shape = _weight_shape(left, env)
            if shape is not None and len(shape) == 2:
                return Spec("float", (shape[1], FEATURES))
            continue
        if not is_value(left, matches, aliases):
            continue
        shape = _weight_shape(right, env)
        if shape is None and isinstance(right, ast.Name) and right.id in aliases:
            # `w = nn.Parameter(torch.randn(8, 4))` in the function itself: the width it is built with.
            shape = _built_shape(aliases[right.id], env)
        if shape is None and how == "rows" and isinstance(right, ast.Name) and recurrent.get(id(node)) == right.id:
            # Propagated again and again (a graph's adjacency): square.
            return Spec("float", (FEATURES, FEATURES))
        if shape is None:
            continue
        width = shape[0] if how == "rows" else shape[-1]
        return Spec("float", (BATCH, width))
    return None


def _packed_target(function_ast, matches):
    """(name, batch_first) of `padded, lengths = pad_packed_sequence(value, batch_first=...)`:
    the value is a PackedSequence, and `name` what it pads out to; None otherwise."""
    for node in walk(function_ast):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call)):
            continue
        call, target = node.value, node.targets[0]
        if _call_name(call) != "pad_packed_sequence" or not call.args or not matches(strip_benign(call.args[0])):
            continue
        if isinstance(target, (ast.Tuple, ast.List)) and target.elts and isinstance(target.elts[0], ast.Name):
            first = next((k.value for k in call.keywords if k.arg == "batch_first"), call.args[1] if len(call.args) > 1 else None)
            return target.elts[0].id, isinstance(first, ast.Constant) and first.value is True
    return None


_BUILDERS = {"randn", "rand", "zeros", "ones", "empty", "Tensor", "FloatTensor"}


def _built_shape(expr, env):
    """The shape `torch.randn(8, 4)` (in `nn.Parameter(...)`) builds, from literal sizes; None otherwise."""
    for _ in range(4):
        if isinstance(expr, ast.Call) and _call_name(expr) in ("Parameter", "Variable") and expr.args:
            expr = expr.args[0]
        elif isinstance(expr, ast.BinOp) and isinstance(expr.right, ast.Constant):
            expr = expr.left  # `torch.randn(3, 20) * 0.01`
        expr = strip_benign(expr)
    if not (isinstance(expr, ast.Call) and _call_name(expr) in _BUILDERS and expr.args):
        return None
    sizes = expr.args[0].elts if len(expr.args) == 1 and isinstance(expr.args[0], (ast.Tuple, ast.List)) else expr.args
    shape = tuple(_const_int(size, env) for size in sizes)
    return shape if shape and len(shape) <= 2 and None not in shape and min(shape) > 0 else None


def _unwrapped(expr):
    """`trans_to_cuda(x)`, `to_var(x)`: a helper that only moves the value, seen through."""
    expr = strip_benign(expr)
    while (
        isinstance(expr, ast.Call) and len(expr.args) == 1 and not expr.keywords and isinstance(expr.func, ast.Name)
        and set(name_tokens(expr.func.id)) & {"cuda", "gpu", "device", "var", "variable"}
    ):
        expr = strip_benign(expr.args[0])
    return expr


# Losses by the target they take: class indices, or values shaped like the prediction.
_CLASS_LOSSES = {"cross_entropy": nn.CrossEntropyLoss, "nll_loss": nn.NLLLoss}
_SAME_LOSSES = {
    "binary_cross_entropy": nn.BCELoss, "binary_cross_entropy_with_logits": nn.BCEWithLogitsLoss,
    "mse_loss": nn.MSELoss, "l1_loss": nn.L1Loss, "smooth_l1_loss": nn.SmoothL1Loss, "huber_loss": nn.HuberLoss,
}
# CTC takes (log-probs [T, N, C], targets, input lengths, target lengths); KL
# divergence a probability target shaped like its input.
_OTHER_LOSSES = {"ctc_loss": "ctc", "kl_div": "kl"}
_LOSS_CLASS_NAMES = {
    **{cls.__name__: "class" for cls in _CLASS_LOSSES.values()},
    **{cls.__name__: "same" for cls in _SAME_LOSSES.values()},
    "CTCLoss": "ctc",
    "KLDivLoss": "kl",
}
_CTC_ARGUMENTS = ("log_probs", "targets", "input_lengths", "target_lengths")
# Regression losses take a target that broadcasts against the prediction.
_BROADCAST = {"mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss"}


def _loss_kind(call, env, aliases):
    """"class" or "same" for a call of a known criterion (`F.cross_entropy`,
    `self.criterion` holding an `nn.BCELoss`, `criterion = nn.MSELoss()`); None otherwise."""
    name = _call_name(call)
    if name in _CLASS_LOSSES:
        return "class"
    if name in _SAME_LOSSES:
        return "same"
    if name in _OTHER_LOSSES:
        return _OTHER_LOSSES[name]
    callee = resolve(call.func, env)
    if isinstance(callee, nn.Module):
        for cls in type(callee).__mro__:
            if cls.__name__ in _LOSS_CLASS_NAMES and cls.__module__.startswith("torch.nn"):
                return _LOSS_CLASS_NAMES[cls.__name__]
        return None
    if isinstance(call.func, ast.Name) and call.func.id in aliases:
        made = aliases[call.func.id]
        if isinstance(made, ast.Call) and _call_name(made) in _LOSS_CLASS_NAMES:
            return _LOSS_CLASS_NAMES[_call_name(made)]
    if isinstance(call.func, ast.Call) and _call_name(call.func) in _LOSS_CLASS_NAMES:
        return _LOSS_CLASS_NAMES[_call_name(call.func)]
    return None


def _last_layer(module):
    last = None
    for layer in module.modules():
        if isinstance(layer, (nn.Linear, nn.Bilinear) + _CONV + _CONV_T + (nn.RNNBase, nn.Embedding)):
            last = layer
    return last


def output_width(module):
    """The width of a model's output when its last layer is a Linear; None otherwise."""
    last = _last_layer(module)
    if isinstance(last, (nn.Linear, nn.Bilinear)):
        return last.out_features
    return None


def _prediction_model(prediction, env, aliases):
    """The model whose output a criterion's prediction is (`model(x)`, `out`
    bound to it, `scores[0]` of it); in a model's own method, the model."""
    for _ in range(4):
        prediction = strip_benign(prediction)
        if isinstance(prediction, ast.Subscript):
            prediction = prediction.value
        elif isinstance(prediction, ast.Name) and prediction.id in aliases and aliases[prediction.id] is not prediction:
            prediction = aliases[prediction.id]
        else:
            break
    model = resolve(prediction.func, env) if isinstance(prediction, ast.Call) else None
    if not isinstance(model, nn.Module) and isinstance(env.get("self"), nn.Module):
        model = env["self"]
    return model if isinstance(model, nn.Module) and not isinstance(model, StandIn) else None


def target_spec(function_ast, matches, env, plan):
    """The target a criterion the code calls takes: class indices below the
    model's output width for cross-entropy and NLL, 0/1 values shaped like
    the prediction for BCE, MSE, L1 and the like; None when the value is no
    criterion's target."""
    if function_ast is None:
        return None
    aliases = aliases_in(function_ast)
    for call in calls_in_order(function_ast):
        arguments = list(call.args[:2]) + [k.value for k in call.keywords if k.arg in ("input", "target")]
        spec = _ctc_spec(call, matches, env, aliases, plan)
        if spec is not None:
            return spec
        if len(arguments) < 2 or not is_value(arguments[1], matches, aliases):
            continue
        kind = _loss_kind(call, env, aliases)
        if kind in (None, "ctc"):
            continue
        if kind == "kl":
            model = _prediction_model(arguments[0], env, aliases)
            width = output_width(model) if model is not None else None
            return Spec("probs", (BATCH, width or FEATURES))
        model = _prediction_model(arguments[0], env, aliases)
        width = output_width(model) if model is not None else None
        last = _last_layer(model) if model is not None else None
        if kind == "class" and width is None and isinstance(last, (nn.Conv2d, nn.ConvTranspose2d)):
            # A segmentation head: one class index per pixel, at the input's size.
            spec = chain_input(Chain(None).of_module(model), plan.spatial)
            side = spec.shape[-1] if spec is not None and len(spec.shape) == 4 else plan.spatial
            return Spec("long", (BATCH, side, side), last.out_channels)
        if kind == "class":
            return Spec("long", (BATCH,), width or max(plan.out, 2))
        if width is not None:
            return Spec("labels_float", (BATCH, width))
        if _loss_name(call, env, aliases) in _BROADCAST:
            # Of unknown width: one value per row broadcasts against any.
            return Spec("float", (BATCH, 1))
        return None
    return None


def _ctc_spec(call, matches, env, aliases, plan):
    """The argument of a CTC loss the value is: log-probabilities [T, N, C]
    (C the model's output width), targets of S = T // 2 labels that are no
    blank (0), input lengths T, target lengths S; None otherwise."""
    by_name = dict(zip(_CTC_ARGUMENTS, call.args))
    by_name.update({k.arg: k.value for k in call.keywords if k.arg in _CTC_ARGUMENTS})
    role = next((r for r, expr in by_name.items() if is_value(expr, matches, aliases)), None)
    if role is None or _loss_kind(call, env, aliases) != "ctc":
        return None
    model = _prediction_model(by_name["log_probs"], env, aliases) if "log_probs" in by_name else None
    classes = (output_width(model) if model is not None else None) or max(plan.out, 2)
    if role == "log_probs":
        return Spec("log_probs", (SEQ, BATCH, classes))
    if role == "targets":
        return Spec("nonblank", (BATCH, SEQ // 2), classes)
    return Spec("full", (BATCH,), SEQ if role == "input_lengths" else SEQ // 2)


def _loss_name(call, env, aliases):
    name = _call_name(call)
    callee = resolve(call.func, env)
    if isinstance(callee, nn.Module):
        return type(callee).__name__
    if isinstance(call.func, ast.Name) and isinstance(aliases.get(call.func.id), ast.Call):
        return _call_name(aliases[call.func.id])
    if isinstance(call.func, ast.Call):
        return _call_name(call.func)
    return name


def _module_called(callee):
    """`model.forward(x)` calls the model as `model(x)` does."""
    if inspect.ismethod(callee) and callee.__name__ == "forward" and isinstance(callee.__self__, nn.Module):
        return callee.__self__
    return callee


def _chain_done(ops):
    return bool(ops) and (ops[-1][0] == "unknown" or (ops[-1][0] == "layer" and isinstance(ops[-1][1], _SIZED)))


def _per_dim(value, dims):
    return tuple(value) if isinstance(value, (tuple, list)) else (value,) * dims


def _simulate(ops, dims, channels, side):
    """Runs the chain's arithmetic on a (channels, side, ..., side) input:
    "match" when a later Linear (or a `view(-1, n)`) takes exactly what the
    layers give, "mismatch" when it does not, "open" when nothing fixes the
    size, "invalid" when a layer would get an empty or too small input."""
    sizes = [side] * dims
    c = channels
    flat = None
    for op in ops:
        kind = op[0]
        if kind == "same":
            continue
        if kind not in ("flatten", "features", "adaptive", "pool", "layer"):
            return "open"
        if kind == "flatten":
            flat = c * _product(sizes)
            continue
        if kind == "features":
            return "match" if c * _product(sizes) == op[1] else "mismatch"
        if kind == "adaptive":
            sizes = [s if o is None else o for s, o in zip(sizes, _per_dim(op[2], dims))]
            continue
        if kind == "pool":
            _, pool_dims, kernel, stride, padding = op
            if pool_dims != dims:
                return "open"
            sizes = _pooled(sizes, kernel, stride or kernel, padding, 1, False)
            if sizes is None:
                return "invalid"
            continue
        layer = op[1]
        if isinstance(layer, nn.Linear):
            width = flat if flat is not None else sizes[-1]
            return "match" if width == layer.in_features else "mismatch"
        if flat is not None:
            return "open"
        if isinstance(layer, _CONV):
            if layer.in_channels != c or len(layer.kernel_size) != dims:
                return "mismatch"
            if layer.padding_mode != "zeros" and not isinstance(layer.padding, str):
                # Reflection needs more input than padding.
                if any(s <= p for s, p in zip(sizes, layer.padding)):
                    return "invalid"
            if isinstance(layer.padding, str):
                if layer.padding == "valid":
                    sizes = _pooled(sizes, layer.kernel_size, layer.stride, 0, layer.dilation, False)
            else:
                sizes = _pooled(sizes, layer.kernel_size, layer.stride, layer.padding, layer.dilation, False)
            c = layer.out_channels
        elif isinstance(layer, _CONV_T):
            if layer.in_channels != c or len(layer.kernel_size) != dims:
                return "mismatch"
            sizes = [
                (s - 1) * st - 2 * p + d * (k - 1) + op_ + 1
                for s, st, p, d, k, op_ in zip(sizes, layer.stride, layer.padding, layer.dilation, layer.kernel_size, layer.output_padding)
            ]
            c = layer.out_channels
        elif isinstance(layer, _MAX_POOL):
            sizes = _pooled(sizes, layer.kernel_size, layer.stride or layer.kernel_size, layer.padding, layer.dilation, layer.ceil_mode, dims)
        elif isinstance(layer, _AVG_POOL):
            sizes = _pooled(sizes, layer.kernel_size, layer.stride or layer.kernel_size, layer.padding, 1, layer.ceil_mode, dims)
        elif isinstance(layer, _ADAPTIVE):
            sizes = [s if o is None else o for s, o in zip(sizes, _per_dim(layer.output_size, dims))]
        elif isinstance(layer, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)):
            if layer.num_features != c:
                return "mismatch"
        elif isinstance(layer, nn.Upsample) and layer.scale_factor is not None and layer.size is None:
            sizes = [int(s * f) for s, f in zip(sizes, _per_dim(layer.scale_factor, dims))]
        elif isinstance(layer, _PADS):
            padding = _per_dim(layer.padding, 2 * dims)
            sizes = [s + padding[2 * (dims - 1 - i)] + padding[2 * (dims - 1 - i) + 1] for i, s in enumerate(sizes)]
        elif not isinstance(layer, _SAME_SHAPE):
            return "open"
        if sizes is None or any(s < 1 for s in sizes):
            return "invalid"
    return "open"


def _pooled(sizes, kernel, stride, padding, dilation, ceil, dims=None):
    dims = dims or len(sizes)
    kernel, stride, padding, dilation = (_per_dim(v, dims) for v in (kernel, stride, padding, dilation))
    out = []
    for s, k, st, p, d in zip(sizes, kernel, stride, padding, dilation):
        span = s + 2 * p - d * (k - 1) - 1
        if span < 0:
            return None
        out.append(-(-span // st) + 1 if ceil else span // st + 1)
    return out


def _product(values):
    result = 1
    for value in values:
        result *= value
    return result


def chain_input(ops, spatial=32):
    """The input a chain of ops implies, or None when it does not say: a
    convolution or pooling first gives (batch, channels, side...) with the
    side a later Linear (after a flatten) takes exactly, tried from the
    plan's own side, the common ones and then every side up to 512; a
    `view(-1, n)` or flatten before a Linear gives flat features."""
    for index, op in enumerate(ops):
        kind = op[0]
        if kind in ("unknown", "return"):
            return None
        if kind in ("index", "permute", "transpose", "cat"):
            return _undo(op, ops[index + 1:], spatial)
        if kind == "features":
            return _flattened(Spec("float", (BATCH, op[1])))
        if kind == "sizes":
            return Spec("float", (BATCH,) + op[1])
        if kind == "flatten":
            rest = [o for o in ops[index + 1:] if o[0] != "same"]
            if rest and rest[0][0] == "layer" and isinstance(rest[0][1], nn.Linear):
                return _flattened(Spec("float", (BATCH, rest[0][1].in_features)))
            return None
        if kind in ("pool", "adaptive"):
            dims = op[1]
            conv = next((o[1] for o in ops[index:] if o[0] == "layer" and isinstance(o[1], _CONV + _CONV_T)), None)
            if conv is None:
                return None
            return _spatial_spec(ops[index:], dims, conv.in_channels, spatial)
        if kind != "layer":
            continue
        layer = op[1]
        if isinstance(layer, _CONV + _CONV_T):
            return _spatial_spec(ops[index:], len(layer.kernel_size), layer.in_channels, spatial)
        if isinstance(layer, (nn.BatchNorm2d, nn.BatchNorm3d, nn.InstanceNorm2d, nn.InstanceNorm3d)):
            dims = 2 if isinstance(layer, (nn.BatchNorm2d, nn.InstanceNorm2d)) else 3
            return _spatial_spec(ops[index:], dims, layer.num_features, spatial)
        if isinstance(layer, _SIZED) or not isinstance(layer, _SAME_SHAPE):
            return None
    return None


def _flattened(spec):
    """A flat input the code flattens first: any shape with as many values per row fits."""
    spec.flattened = True
    return spec


def _as_image(spec):
    """(batch, channels, side, side) with as many values per row as a flat
    spec, for one or three channels; None when no square image has them."""
    features = spec.shape[-1]
    for channels in (1, 3):
        side = int(round((features / channels) ** 0.5))
        if side > 1 and channels * side * side == features:
            return Spec(spec.kind, (spec.shape[0], channels, side, side))
    return None


def _spatial_spec(ops, dims, channels, spatial):
    outcomes = {}
    order = [spatial] + [s for s in _COMMON_SIDES if s != spatial] + list(range(1, 513))
    matched = None
    for side in order:
        if side not in outcomes:
            outcomes[side] = _simulate(ops, dims, channels, side)
            if outcomes[side] == "match":
                # The first side in the order that matches: the ones after it cannot change that.
                matched = side
                break
    if matched is not None:
        side = matched
    else:
        if "mismatch" in outcomes.values() and "open" not in outcomes.values():
            return None
        usable = [s for s in order if outcomes[s] == "open"]
        if not usable:
            return None
        bigger = [s for s in sorted(set(usable)) if s >= spatial]
        side = spatial if outcomes[spatial] == "open" else (bigger[0] if bigger else usable[0])
    return Spec("float", (BATCH, channels) + (side,) * dims)


_LOSS_WORDS = {"loss", "criterion", "crit", "fn", "func", "function", "objective"}


def _camel_words(name):
    """`criterionAT` -> criterion, at; `FocalLoss` -> focal, loss; `kd_loss_fn` -> kd, loss, fn."""
    return [w.lower() for w in re.findall(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+", name)]


class Synth:
    """Builds everything one attempt needs, remembering what it stood in."""

    def __init__(self, user, plan, hints):
        self.user = user
        self.plan = plan
        self.hints = hints or {}
        self.stand_ins = []  # parameter names given a StandIn model
        self.globals_stood_in = []  # module-level script variables given stand-ins
        self.data_globals = []  # module-level data sources given synthesized batches (inputs)
        self.configs_built = []  # (name, class): configs built as the file's own class with its defaults
        self._compared = None  # setting -> a string the code compares it with (`_compared_strings`)
        self.attributes_stood_in = []  # `self.x` the constructor left unset
        self.attribute_inputs = []  # (`self.x`, the method that stores a batch there): inputs, synthesized
        self.losses_stood_in = []  # criteria whose StandInLoss ran (the program's own loss did not)
        self.modules = {}  # display prefix -> module, for gradients
        self.ctor_args = {}
        self._generator = torch.Generator().manual_seed(1)
        self._building = set()  # classes being constructed: none is its own argument
        self._ctor_loaders = None  # (loader, parameter) made for the constructor running now

    # -- models and instances ------------------------------------------------

    def _hinted_class(self, hint):
        """The class a parameter's type hint names in the user's module (a
        string hint evaluated there: `model: "ConvNet"`), or None."""
        if isinstance(hint, str) and self.user is not None:
            try:
                hint = eval(compile(hint, "<hint>", "eval"), dict(self.user.ns))
            except Exception:  # noqa: BLE001 - a hint that names nothing here
                return None
        return hint if isinstance(hint, type) else None

    def _from_project(self, cls):
        """Whether a module under the project's folders (not the file itself,
        not an installed library) defines `cls`."""
        module = sys.modules.get(getattr(cls, "__module__", None) or "")
        path = getattr(module, "__file__", None) or ""
        roots = (self.user.spec.get("project") or {}).get("paths", [])
        return module is not self.user.module and any(path.startswith(root + os.sep) for root in roots)

    def model_for(self, name, hinted=None):
        """A model for a parameter called `name`: the class its type hint names
        (also one the project's own modules define), else the file's own class
        when one fits."""
        ns = self.user.ns
        if hinted is not None and issubclass(hinted, nn.Module) and self._from_project(hinted):
            # Imported from the project (`from models import ConvNet`): its own code.
            try:
                return self.construct(hinted)
            except Exception:  # noqa: BLE001 - one the synthesized arguments cannot build
                pass
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

    def loss_for(self, name):
        """The file's own loss class a criterion called `name` is: the class the
        code binds to it, else the one whose name its name spells out
        (`criterionAT` for `AT`, `focal_criterion` for `FocalLoss`); None when
        nothing in the file says which."""
        if self.user is None:
            return None
        ns = self.user.ns
        bound = self.hints.get("param_classes", {}).get(name) or self.hints.get("var_classes", {}).get(name)
        candidates = [bound] if bound else []
        words = set(_camel_words(name)) - _LOSS_WORDS
        for class_name in self.user.module_classes():
            own = set(_camel_words(class_name))
            if class_name in candidates or not own - _LOSS_WORDS or not (own - _LOSS_WORDS) <= words:
                continue
            cls = ns.get(class_name)
            forward = getattr(cls, "forward", None)
            try:
                required = [
                    p for p in list(inspect.signature(forward).parameters.values())[1:]
                    if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                ]
            except (TypeError, ValueError):
                continue
            # A loss compares (prediction, target); a one-input module is a model.
            if own & _LOSS_WORDS or len(required) >= 2:
                candidates.append(class_name)
        for class_name in candidates[:2]:
            cls = ns.get(class_name)
            if isinstance(cls, type) and issubclass(cls, nn.Module) and class_name not in self._building:
                try:
                    return self.construct(cls)
                except Exception:  # noqa: BLE001 - a loss the guessed arguments cannot build: the stand-in
                    continue
        return None

    def construct(self, cls):
        """An instance of a class of the file: a call found in the file first,
        then arguments guessed from the constructor's parameter names."""
        errors = []
        calls = self.hints.get("ctor_calls", {}).get(cls.__name__, [])
        # The plan may start from another of the file's calls (`Runner(absgrad=False)`).
        shift = self.plan.ctor % len(calls) if calls else 0
        for source in calls[shift:] + calls[:shift]:
            try:
                instance = eval(compile(source, self.user.path, "eval"), self.user.ns)
                self._remember_ctor(cls, source)
                return instance
            except Exception as error:  # noqa: BLE001
                errors.append(error)
        site = self.hints.get("ctor_sites", {}).get(cls.__name__)
        if site is not None and self.user is not None and cls.__name__ not in self._building:
            try:
                return self._from_site(site)
            except Exception as error:  # noqa: BLE001 - then from guessed arguments
                errors.append(error)
        try:
            init = cls.__init__
            signature = inspect.signature(init)
        except (TypeError, ValueError):
            return cls()
        init_ast = None
        node = self.user.find_class(cls.__name__)
        if node is not None:
            init_ast = methods_of(node).get("__init__")
        self._building.add(cls.__name__)
        outer, self._ctor_loaders = self._ctor_loaders, []
        try:
            args, kwargs = self.arguments(signature, init_ast, {}, skip_self=True, constructor=True)
            loaders = self._ctor_loaders
        finally:
            self._building.discard(cls.__name__)
            self._ctor_loaders = outer
        self.ctor_args[cls.__name__] = dict(kwargs, **{f"#{i}": a for i, a in enumerate(args)})
        instance = cls(*args, **kwargs)
        if loaders and node is not None:
            self._refill_loaders(instance, node, loaders)
        return instance

    def _from_site(self, site):
        """The instance the file's script code builds, with the statements
        that build its arguments, run in a copy of the module's namespace."""
        env = dict(self.user.ns)
        for block in site["statements"]:
            tree = parse_at(textwrap.dedent(block["text"]), block["line"])
            exec(compile(tree, self.user.path, "exec"), env)
        call = ast.parse(site["call"], mode="eval")
        ast.increment_lineno(call, site["line"] - 1)
        return eval(compile(call, self.user.path, "eval"), env)

    def _refill_loaders(self, instance, class_node, loaders):
        """A loader handed to a constructor (`Trainer(data_loader, config)`) is
        iterated by another method (`next(iter(self.data_loader))`), on the
        models the constructor built: its batches are remade for them."""
        methods = methods_of(class_node)
        init_ast = methods.get("__init__")
        env = {k: v for k, v in vars(instance).items() if not k.startswith("_")}
        if isinstance(instance, nn.Module):
            env.update(dict(instance.named_children()))
        for method_name in methods:
            # `self.process_batch(inputs)` reads as `process_batch(inputs)` below:
            # the bound method leads to what that method reads of the batch.
            # A property would run the user's code here: only plain methods.
            if method_name != "__init__" and method_name not in env and inspect.isfunction(inspect.getattr_static(instance, method_name, None)):
                env[method_name] = getattr(instance, method_name)
        for loader, name in loaders:
            attributes = [
                t.attr
                for n in walk(init_ast) if init_ast is not None and isinstance(n, ast.Assign) and is_value(n.value, name_matcher(name), {})
                for t in n.targets
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
            ]
            # `self.val_iter = iter(self.val_loader)` here, `next(self.val_iter)` in another method.
            attributes += [
                t.attr
                for n in walk(init_ast) if init_ast is not None and isinstance(n, ast.Assign)
                and isinstance(n.value, ast.Call) and _call_name(n.value) == "iter" and n.value.args
                and any(is_value(n.value.args[0], attr_matcher("self", a), {}) for a in attributes)
                for t in n.targets
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
            ]
            for attribute in attributes:
                for method_name, method in methods.items():
                    if method_name == "__init__":
                        continue
                    plain = _SelfToNames().visit(ast.parse(ast.unparse(method)).body[0])
                    targets = loop_targets(plain, attribute)
                    target = targets[0] if targets else _next_target(plain, attribute)
                    if target is None:
                        continue
                    try:
                        layout = self.layout_of_target(target, plain, dict(env))
                        loader[:] = [self.materialize(layout) for _ in range(len(loader) or 3)]
                    except Exception:  # noqa: BLE001 - the first batches stay
                        pass
                    break

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
        tokens = set(name_tokens(name))
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
        if lowered.startswith("criterion") and not (usage and (usage["attrs"] - {"to", "cuda"} or usage["keys"] or usage["iterated"])):
            return "criterion"
        if lowered in ("criterion", "crit", "loss_fn", "loss_func", "lossfn", "loss_function", "criteria") or lowered.endswith("criterion") or lowered.endswith("_loss_fn"):
            return "criterion"
        if lowered in CONFIG_NAMES and not (usage and usage["called"]):
            return "config"
        if tokens & CONFIG_NAMES and not (usage and usage["called"]) and self._read_as_object(function_ast, name):
            # `config_file.weight_a`, read here or in the file's function it is handed to.
            return "config"
        if tokens & SINK_WORDS and not is_model_name(name):
            return "sink"
        if usage and self.duck_class(usage) is not None:
            return "instance"
        if usage and not tokens & (LABEL_WORDS | MASK_WORDS | TOKEN_WORDS | IMAGE_WORDS | _BATCH_WORDS) and _fields_only(function_ast, name, usage):
            # `cmdl.lr`, `hps.gamma`: only settings read off it, never a method.
            return "config"
        if usage and usage["attrs"] & {"append", "extend", "insert"}:
            return "list"
        if usage and usage["attrs"] & {"items", "update", "setdefault", "keys", "values"} and not usage["iterated"]:
            return "dict"
        if usage and usage["called"]:
            if "loss" in tokens or "metric" in tokens or "fn" in tokens or "func" in tokens:
                return "criterion"
            return "model"
        if is_model_name(name) and not (usage and usage["attrs"] & {"size", "shape", "permute", "view", "reshape", "transpose", "unsqueeze", "squeeze", "ndim", "numel"}):
            # `decoder_inputs.permute(2, 0, 1)` is a tensor, whatever its name says.
            return "model"
        if usage and usage["attrs"] & {"parameters", "named_parameters", "eval", "train", "state_dict", "modules", "children"}:
            return "model"
        if "loader" in lowered or lowered in ("batches", "dataloader", "data_iter", "iterator"):
            return "loader"
        if usage and usage["iterated"] and not usage["attrs"] & _READ_AS_TENSOR:
            # A tensor is iterated too (`for j, image in enumerate(feature)`), but
            # no loader has a `.size()` or a `.cuda()`.
            return "loader"
        if self._iterated_as_attribute(name, function_ast):
            return "loader"
        if usage and (usage["keys"] or usage["unpacked"] or (usage["indexes"] and not usage["attrs"] & _READ_AS_TENSOR)) and not tokens & (LABEL_WORDS | MASK_WORDS):
            return "batch"
        if function_ast is not None and (_counts_with(function_ast, name) or _sizes_with(function_ast, name)):
            return "int"
        if lowered in ("batch", "data", "sample", "inputs_targets", "minibatch"):
            return "batch"
        if tokens & {"epochs", "epoch", "steps", "step", "iters", "iterations", "iter", "max", "num", "n", "idx", "id", "index", "k", "topk", "size", "len", "length", "rank", "seed", "count", "every", "freq", "interval", "bos", "eos", "sos", "pad", "start", "end", "token"} and not tokens & (TOKEN_WORDS - {"token"}):
            if not tokens & {"ids", "tokens"} or lowered.endswith("_id"):
                return "int"
        if tokens & {"lr", "eps", "alpha", "beta", "gamma", "tau", "temperature", "margin", "scale", "momentum", "decay", "std", "noise", "clip", "norm", "threshold", "lambda", "lam", "weight", "ratio", "p", "prob", "dropout"}:
            return "float"
        if tokens & {"path", "file", "filename", "dir", "folder", "prefix", "name", "root", "fname", "out", "output", "save", "ckpt", "checkpoint", "mode", "split", "phase", "tag", "title"} and not tokens & {"lengths", "lens"}:
            return "str"
        if tokens & {"verbose", "debug", "use", "is", "flag", "train", "training", "eval", "plot", "show", "save", "return"} and lowered.split("_")[0] in ("verbose", "debug", "use", "is", "flag", "return", "show", "plot"):
            return "bool"
        if tokens & {"lengths", "lens", "length"} or lowered in ("lengths", "lens", "seq_lens", "seq_lengths", "x_lens"):
            return "lengths"
        if tokens & LABEL_WORDS:
            return "labels"
        if tokens & MASK_WORDS:
            return "mask"
        if lowered in TOKEN_WORDS or tokens & {"ids", "tokens", "token"}:
            return "tokens"
        return "tensor"

    def factory_for(self, name, function_ast):
        """The file's own function a callable argument stands for: one that
        accepts every call the code makes of it (`base_encoder(num_classes=dim)`)
        and shares a word with its name (`mlp_encoder`); None otherwise."""
        if function_ast is None or self.user is None or getattr(function_ast, "name", None) != "__init__":
            # Only a constructor's argument builds parts from a callable (`self.enc = make(...)`).
            return None
        calls = [
            n.value for n in walk(function_ast)
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name)
            and n.value.func.id == name and all(isinstance(t, ast.Attribute) for t in n.targets)
        ]
        if not calls:
            return None
        words = set(name_tokens(name)) - {"fn", "func", "function", "base", "make", "build", "get", "create"}
        for _, statements in self.user.blocks:
            for statement in statements:
                if not isinstance(statement, ast.FunctionDef) or statement is function_ast or not words & set(name_tokens(statement.name)):
                    continue
                candidate = self.user.ns.get(statement.name)
                if not callable(candidate):
                    continue
                try:
                    signature = inspect.signature(candidate)
                    for call in calls:
                        signature.bind(*[None] * len(call.args), **{k.arg: None for k in call.keywords if k.arg})
                except TypeError:
                    continue
                return candidate
        return None

    def _read_as_object(self, function_ast, name):
        """Whether the code reads attributes or keys of `name`, itself or in a
        function of the file it hands `name` to."""
        if function_ast is None:
            return False
        usage = usage_of(function_ast, name)
        if usage["keys"] or usage["attrs"] - _TENSOR_ATTRS:
            return True
        for call in calls_in_order(function_ast):
            if not isinstance(call.func, ast.Name) or self.user is None:
                continue
            callee = self.user.find_function(call.func.id)
            if callee is None:
                continue
            names = [a.arg for a in callee.args.args]
            for position, arg in enumerate(call.args):
                if isinstance(arg, ast.Name) and arg.id == name and position < len(names):
                    inner = usage_of(callee, names[position])
                    if inner["keys"] or inner["attrs"] - _TENSOR_ATTRS:
                        return True
        return False

    def duck_class(self, usage):
        """The file's own class whose methods and attributes cover every
        non-tensor attribute the code reads of a value (`meter.iter_tic()`,
        `memory.add_entries(...)`); None when no one class does."""
        foreign = usage["attrs"] - _TENSOR_ATTRS
        if not foreign or self.user is None:
            return None
        for _, statements in self.user.blocks:
            for statement in statements:
                if not isinstance(statement, ast.ClassDef) or statement.name in self._building:
                    continue
                members = set(methods_of(statement))
                members |= {
                    n.attr for n in walk(statement)
                    if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self" and isinstance(n.ctx, ast.Store)
                }
                cls = self.user.ns.get(statement.name)
                if foreign <= members and isinstance(cls, type):
                    return cls
        return None

    def value_for(self, parameter, function_ast, env, constructor):
        name = parameter.name
        has_default = parameter.default is not inspect.Parameter.empty
        role = self.role(name, function_ast)
        if role == "int" and not has_default and not constructor and self.flow_spec(function_ast, name_matcher(name), env) is not None:
            role = "tensor"  # handed to a layer (`self.encoder_k(im_k)`), whatever its name says
        if role == "device":
            return "cpu"
        if role == "dtype":
            return torch.float32
        if has_default:
            default = parameter.default
            if role == "int" and isinstance(default, int) and not isinstance(default, bool):
                tokens = set(name_tokens(name))
                if tokens & {"epochs", "epoch"} and default > 2:
                    return 2  # hazards that grow per epoch show from the second
                if tokens & {"steps", "iters", "iterations"} and default > 3:
                    return 3
                if tokens & {"max", "len", "length"} and default > SEQ:
                    return SEQ
            return _DEFAULT
        # A type hint overrides a guess from the name of another kind (`out_features: int` is no path).
        hinted = _hinted_value(parameter, name)
        if hinted is not None and not (type(hinted) is int and role in ("int", "float")) and type(hinted).__name__ != role:
            return hinted
        passed = self._passed_instance(name) if role not in ("loader", "batch") else None
        if passed is not None:
            return passed
        shape = self._shape_argument(name, function_ast)
        if shape is not None:
            return shape
        if constructor and role in ("tensor", "int", "float", "labels", "mask", "tokens", "lengths", "str", "bool", "batch"):
            value = number_for(name)
            if role == "str":
                return "default"
            return value
        factory = self.factory_for(name, function_ast) if role in ("model", "criterion") else None
        if factory is not None:
            return factory
        if role == "model":
            model = self.model_for(name, self._hinted_class(parameter.annotation))
            self.modules[name] = model
            return model
        if role == "instance":
            return self.construct(self.duck_class(usage_of(function_ast, name)))
        if role == "optimizer":
            # The models the arguments carry, else those built so far (a script's `model`).
            modules = self._all_modules(env) or [m for m in self.modules.values() if isinstance(m, nn.Module)]
            params = list({id(p): p for m in modules for p in m.parameters()}.values())
            return torch.optim.SGD(params or [nn.Parameter(torch.zeros(1))], lr=1e-3)
        if role == "scheduler":
            return Sink()
        if role == "criterion":
            hint = parameter.annotation
            if isinstance(hint, str) and self.user is not None:
                try:
                    hint = eval(compile(hint, "<hint>", "eval"), dict(self.user.ns))
                except Exception:  # noqa: BLE001 - a hint that names nothing here
                    hint = None
            if isinstance(hint, type) and issubclass(hint, nn.Module) and getattr(hint, "__module__", "").startswith("torch.nn"):
                # The code's own type hint names the loss (`criterion: nn.CrossEntropyLoss`).
                try:
                    return hint()
                except Exception:  # noqa: BLE001 - one that needs arguments: the stand-in
                    pass
            real = self.loss_for(name)
            if real is not None:
                return real
            usage = usage_of(function_ast, name) if function_ast is not None else {"call_unpacked": 0}
            return StandInLoss(max(usage["call_unpacked"], 1), name=name, record=self.losses_stood_in)
        if role == "config":
            return self.config_for(name, function_ast)
        if role == "sink":
            return Scaler() if "scaler" in name_tokens(name) else Sink()
        if role == "list":
            return []
        if role == "dict":
            return collections.defaultdict(list)
        if role == "int":
            tokens = set(name_tokens(name))
            if tokens & {"eos", "end"}:
                return 2
            if tokens & {"bos", "sos", "start"}:
                return 1
            if tokens & {"pad", "seed", "rank", "idx", "index", "epoch"}:
                return 0
            if tokens & {"epochs"}:
                return 2
            if tokens & {"k", "topk", "every", "freq", "interval"}:
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
            loader = self.loader(name, function_ast, env)
            if constructor and self._ctor_loaders is not None:
                self._ctor_loaders.append((loader, name))
            return loader
        if role == "batch":
            return self.batch_from_usage(name, function_ast, env)
        value = self.tensor_for(name, function_ast, env, role).make()
        if function_ast is not None and _numpy_input(function_ast, name):
            # `torch.from_numpy(perturb)`: the code is handed an array.
            return value.detach().numpy()
        return value

    def _shape_argument(self, name, function_ast):
        """A tuple of sizes for a parameter named as one (`input_shape`) that
        the code reads element by element (`nn.Conv2d(input_shape[0], 32, 8)`)
        or unpacks into sizes (`torch.zeros(1, *input_shape)`): channels, then
        the plan's image side per dimension of the convolution its first size
        feeds; one feature size otherwise. None for any other parameter."""
        if function_ast is None or "shape" not in name_tokens(name):
            return None
        indexed = star = False
        dims = 0
        for node in walk(function_ast):
            if isinstance(node, ast.Starred) and isinstance(node.value, ast.Name) and node.value.id == name:
                star = True
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == name:
                indexed = True
            if isinstance(node, ast.Call) and node.args and is_value(node.args[0], key_matcher(name, 0), {}):
                match = re.fullmatch(r"(?:Lazy)?Conv(?:Transpose)?([123])d", _call_name(node) or "")
                dims = int(match.group(1)) if match else dims
        if not (indexed or star):
            return None
        return (3,) + (self.plan.spatial,) * dims if dims else (FEATURES,)

    def _passed_instance(self, name):
        """An instance of the file's own plain class (not a model) that the
        file's calls pass for this parameter (`config = LearningConfig()` ...
        `_fit(batches, config)`), built as the file builds it; None otherwise."""
        class_name = self.hints.get("param_classes", {}).get(name)
        cls = self.user.ns.get(class_name) if class_name and self.user is not None else None
        if not isinstance(cls, type) or issubclass(cls, nn.Module) or class_name in self._building:
            return None
        if hasattr(cls, "__getitem__") or hasattr(cls, "__iter__"):
            return None  # a dataset or a container: its content is the program's data, synthesized
        try:
            return self.construct(cls)
        except Exception:  # noqa: BLE001 - one the guessed arguments cannot build
            return None

    def config_for(self, name, function_ast=None):
        """A config object for `name`: the file's own config class with its
        defaults when its fields cover every setting the code reads; the
        argument defaults of the file's parser when the file binds its result
        to that name (`opt = parser.parse_args()`, or the usual `args`);
        made-up fields otherwise."""
        read = usage_of(function_ast, name)["attrs"] - _TENSOR_ATTRS if function_ast is not None else set()
        cls = self._config_class(read)
        if cls is not None:
            try:
                instance = cls()
            except Exception:  # noqa: BLE001 - one its defaults cannot build
                instance = None
            if instance is not None:
                self.configs_built.append((name, cls.__name__))
                return instance
        defaults = self.hints.get("parser_defaults") or {}
        if defaults and (name in self.hints.get("parsed_as", []) or name in _PARSED_NAMES):
            return AutoConfig(name, defaults, "the argument defaults of the file's parser", guesses=self._compared_strings())
        return AutoConfig(name, guesses=self._compared_strings())

    def _compared_strings(self):
        """Setting -> the first string the user's code compares it with
        (`if cmdl.optim == "Adam":`), in the file and the project's modules it
        imported: a made-up value that takes one of the program's own paths."""
        if self._compared is not None:
            return self._compared
        self._compared = {}
        if self.user is None:
            return self._compared
        trees = [ast.Module(body=list(statements), type_ignores=[]) for _, statements in self.user.blocks]
        roots = (self.user.spec.get("project") or {}).get("paths", [])
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None) or ""
            if path.endswith(".py") and any(path.startswith(root + os.sep) for root in roots):
                try:
                    with open(path, encoding="utf-8") as handle:
                        trees.append(ast.parse(handle.read()))
                except (OSError, SyntaxError, ValueError):
                    continue
        for tree in trees:
            for node in walk(tree):
                if (
                    isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute) and len(node.ops) == 1
                    and isinstance(node.ops[0], ast.Eq) and isinstance(node.comparators[0], ast.Constant)
                    and isinstance(node.comparators[0].value, str)
                ):
                    self._compared.setdefault(node.left.attr, node.comparators[0].value)
        return self._compared

    def _config_class(self, read):
        """The file's class (not a model) whose fields cover `read` and that
        builds from its own defaults (`class Config: lr = 1e-3`, a dataclass)."""
        if not read or self.user is None:
            return None
        for _, statements in self.user.blocks:
            for statement in statements:
                if not isinstance(statement, ast.ClassDef) or statement.name in self._building:
                    continue
                fields = {t.id for s in statement.body if isinstance(s, ast.Assign) for t in s.targets if isinstance(t, ast.Name)}
                fields |= {s.target.id for s in statement.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
                fields |= {
                    n.attr for n in walk(methods_of(statement).get("__init__") or ast.Pass())
                    if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self" and isinstance(n.ctx, ast.Store)
                }
                cls = self.user.ns.get(statement.name)
                if not read <= fields or not isinstance(cls, type) or issubclass(cls, nn.Module):
                    continue
                try:
                    required = [
                        p for p in inspect.signature(cls).parameters.values()
                        if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                    ]
                except (TypeError, ValueError):
                    continue
                if not required:
                    return cls
        return None

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
        spec = None
        packed = _packed_target(function_ast, matches) if function_ast is not None else None
        if packed is not None:
            padded = self.tensor_for(packed[0], function_ast, env)
            if len(padded.shape) == 3:
                batch, time = (0, 1) if packed[1] else (1, 0)
                return Spec("packed", (padded.shape[batch], padded.shape[time], padded.shape[2]))
            return Spec("packed", (BATCH, SEQ, padded.shape[-1] if padded.shape else FEATURES))
        if function_ast is not None:
            spec = chain_input(Chain(self.user.class_ast_of).of_function(function_ast, matches, env), self.plan.spatial)
            spec = spec or self.flow_spec(function_ast, matches, env)
        if spec is None:
            spec = target_spec(function_ast, matches, env, self.plan)
        if spec is None and function_ast is not None:
            spec = self._target_through_calls(function_ast, matches, env)
        if spec is None and function_ast is not None and _indexes_with(function_ast, name) and (role or self.role(name, None)) not in ("mask", "tokens"):
            # `logp[rows, actions]`: one index per row.
            spec = Spec("long", (BATCH,), 2)
        if spec is None:
            spec = self.spec_by_name(name, role)
        if getattr(spec, "flattened", False) and len(spec.shape) == 2 and set(name_tokens(name)) & IMAGE_WORDS:
            # Images the code flattens before a Linear (`img.view(img.size(0), -1)`):
            # as images, which the rest of the code may compare with others.
            spec = _as_image(spec) or spec
        if function_ast is None:
            return spec
        dims, indexes = shape_usage(function_ast, name)
        if indexes and spec.kind not in ("long", "lengths"):
            return Spec("long", spec.shape, 2)
        if dims > len(spec.shape):
            kind = "float" if spec.kind in ("long", "labels_float") and not indexes else spec.kind
            if spec.kind == "float" and len(spec.shape) >= 2:
                # The features a layer takes stay last (`b, t, e = *x.shape` before a
                # Linear): the dimensions the code reads besides come between.
                return Spec(kind, tuple(spec.shape[:-1]) + (SEQ,) * (dims - len(spec.shape)) + tuple(spec.shape[-1:]))
            return Spec(kind, tuple(spec.shape) + (FEATURES if spec.kind == "float" else self.plan.out,) * (dims - len(spec.shape)))
        return spec

    def spec_by_name(self, name, role=None):
        role = role or self.role(name, None)
        tokens = set(name_tokens(name))
        if role == "labels":
            return Spec("labels_float" if self.plan.labels == "float" else "long", (BATCH,), 2)
        if role == "mask" and self.plan.tokens == "seq" and tokens & {"attention", "attn"}:
            # A token sequence's attention mask: 1 for every token kept.
            return Spec("ones", (BATCH, SEQ))
        if role == "mask" and self.plan.tokens == "seq" and tokens & {"padding", "pad", "src", "tgt", "key", "token", "tokens"}:
            return Spec("bool", (BATCH, SEQ))
        if role == "mask":
            return Spec("bool", (BATCH,))
        if role == "lengths":
            return Spec("lengths", (BATCH,))
        if role == "tokens":
            return Spec("long", (BATCH, SEQ) if self.plan.tokens == "seq" else (BATCH,), FEATURES)
        if tokens & IMAGE_WORDS:
            return Spec("float", (BATCH, 3, IMAGE, IMAGE))
        return Spec("float", (BATCH, FEATURES))

    def flow_spec(self, function_ast, matches, env, depth=0):
        """The spec of the first layer the value reaches, following calls of
        modules (`model(x)`, `self.encoder(x)`) and of the class's own methods."""
        if function_ast is None or depth > 4:
            return None
        env = dict(_local_modules(function_ast, env), **env)
        for call, position in flows(function_ast, matches):
            callee = _module_called(resolve(call.func, env))
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
                method = method_ast(self.user.class_ast_of, env["self"], call.func.attr)
                if method is not None:
                    names = [a.arg for a in method.args.args][1:]
                    if position < len(names):
                        spec = self.flow_spec(method, name_matcher(names[position]), {"self": env["self"]}, depth + 1)
                        if spec is not None:
                            return spec
        for call, position in flows(function_ast, matches, sliced=True):
            # Token ids sliced into an embedding (`self.embed(tgt[:, :-1])`) stay
            # below its vocabulary; a slice of features fixes no width.
            callee = _module_called(resolve(call.func, env))
            spec = self.module_spec(callee, position, depth + 1) if isinstance(callee, nn.Module) else None
            if spec is not None and spec.kind == "long":
                return spec
        return product_spec(function_ast, matches, env)

    def module_spec(self, module, position, depth=0):
        if isinstance(module, StandIn):
            return None
        if position == 0:
            # The layers in the order forward calls them fix channels and sizes.
            spec = chain_input(Chain(self.user.class_ast_of).of_module(module), self.plan.spatial)
            if spec is not None:
                return spec
        node = self.user.class_ast_of(module)
        forward = methods_of(node).get("forward") if node is not None else None
        if forward is not None and depth <= 4:
            names = [a.arg for a in forward.args.args][1:]
            if position < len(names):
                spec = self.flow_spec(forward, name_matcher(names[position]), {"self": module}, depth + 1)
                if spec is not None:
                    return spec
                if position == 0:
                    return None if self._first_layer_fed_by_others(module, forward, names) else leaf_spec(module, self.plan)
                return self.spec_by_name(names[position])
        if position == 0:
            return leaf_spec(module, self.plan)
        return None

    def _first_layer_fed_by_others(self, module, forward, names):
        """Whether the module's first known layer (what `leaf_spec` reads) takes
        another input of forward straight (`self.fc(z)` in `forward(self, img, z)`):
        it then says nothing of the first input."""
        first = next((m for m in module.modules() if m is not module and not list(m.children()) and leaf_spec(m, self.plan) is not None), None)
        if first is None:
            return False
        chain = Chain(self.user.class_ast_of)
        for other in names[1:]:
            ops = chain.of_function(forward, name_matcher(other), {"self": module})
            if ops and ops[0][0] == "layer" and ops[0][1] is first:
                return True
        return False

    # -- loaders and batches -------------------------------------------------

    def _iterated_as_attribute(self, name, function_ast):
        """Whether a constructor keeps `name` (`self.testloader = test_data`) for
        another method of its class to iterate (`for x, y in self.testloader`)."""
        if self.user is None or getattr(function_ast, "name", None) != "__init__":
            return False
        attributes = {
            t.attr
            for n in walk(function_ast) if isinstance(n, ast.Assign) and is_value(n.value, name_matcher(name), {})
            for t in n.targets
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
        }
        if not attributes:
            return False
        for _, statements in self.user.blocks:
            for statement in statements:
                if not isinstance(statement, ast.ClassDef):
                    continue
                methods = methods_of(statement)
                if not any(m is function_ast for m in methods.values()):
                    continue
                for method in methods.values():
                    if method is function_ast:
                        continue
                    for attribute in attributes:
                        if _iterates_attribute(method, attribute):
                            return True
                return False
        return False

    def loader(self, name, function_ast, env):
        # The models built so far (script variables stood in before it, the
        # file's own instances) are what its batches are shaped for.
        env = dict({k: v for k, v in self.modules.items() if k and k.isidentifier()}, **env)
        for key, value in self.user.ns.items() if self.user is not None else ():
            if isinstance(value, nn.Module) and key not in env:
                env[key] = value
        targets = loop_targets(function_ast, name)
        target = targets[0] if targets else _next_target(function_ast, name)
        layout = self.layout_of_target(target, function_ast, env)
        return Loader([self.materialize(layout) for _ in range(3)])

    def field_of(self, name, attribute, function_ast, env):
        """The tensor a data source holds all its samples in (`dataset.data`,
        `dataset.targets`), read whole by the code (`dataset.data[:100]`,
        `torch.unsqueeze(dataset.data, 1)`): shaped after where the code puts
        it, else by the attribute's name. None when the code does not read
        the attribute as a tensor: then it is no data the verifier can make."""
        if function_ast is None or not _field_read_as_tensor(function_ast, name, attribute, env):
            return None
        spec = self.tensor_for(attribute, function_ast, env, matches=attr_matcher(name, attribute))
        return spec.make()

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

    def layout_of_name(self, name, function_ast, env, depth=0):
        usage = usage_of(function_ast, name)
        targets = loop_targets(function_ast, name) if depth < 4 and not usage["attrs"] & _READ_AS_TENSOR else []
        if targets and not (usage["keys"] or usage["indexes"] or usage["unpacked"]) and not (isinstance(targets[0], ast.Name) and targets[0].id == name):
            # One loader of several (`valid_loader = loaders[i]; for batch in valid_loader`),
            # unless the code also hands it whole to a call (a list of tensors given to a model).
            handed = [c for c, _ in flows(function_ast, name_matcher(name)) if _call_name(c) not in ("enumerate", "iter", "tqdm", "len", "zip", "list", "next")]
            if not handed:
                return ("loader", self.layout_of_target(targets[0], function_ast, env))
        tensor_methods = {"to", "size", "shape", "cuda", "float", "dim", "view", "reshape", "numpy", "cpu", "long", "unsqueeze", "squeeze", "permute", "flatten", "sum", "mean", "detach", "max", "argmax", "ndim", "device", "dtype"}
        if not (usage["keys"] or usage["indexes"] or usage["unpacked"] or usage["attrs"]) and depth < 2:
            # Handed on whole to the user's own code (`model.test_step(batch, i)`,
            # which unpacks it): the layout that code reads.
            for call in calls_in_order(function_ast):
                positions = [i for i, a in enumerate(call.args) if isinstance(a, ast.Name) and a.id == name]
                target = self._callee(call, env) if positions else None
                if target is None or positions[0] >= len(target[1]):
                    continue
                callee_ast, names, callee_env = target
                inner = usage_of(callee_ast, names[positions[0]])
                if inner["unpacked"] or inner["indexes"]:
                    return self.layout_of_name(names[positions[0]], callee_ast, callee_env, depth + 1)
        through = self._keys_through_calls(function_ast, name, env)
        if usage["keys"] or (through and not usage["attrs"] and not usage["indexes"] and not usage["unpacked"]):
            elements = {k: self._element(name, k, function_ast, env) for k in usage["keys"]}
            for key, (callee_ast, parameter, callee_env) in through.items():
                if key in elements and elements[key][0] != "tensor":
                    continue
                spec = self.tensor_for(_key_name(key), callee_ast, callee_env, matches=key_matcher(parameter, key))
                guess = self.spec_by_name(_key_name(key))
                # What the callee's own code says wins over a guess from the key's name.
                if key not in elements or (spec.kind, spec.shape) != (guess.kind, guess.shape):
                    elements[key] = ("tensor", spec)
            return ("dict", elements)
        if usage["unpacked"] or (usage["indexes"] and not usage["attrs"] & _READ_AS_TENSOR):
            count = max(usage["indexes"], usage["unpacked"])
            names = self._unpacked_names(function_ast, name, count)
            elements = []
            for index in range(count):
                element_name = names[index] if index < len(names) else ("input" if index == 0 else "labels")
                index_matcher = key_matcher(name, index)
                spec = self.flow_spec(function_ast, index_matcher, env)
                if spec is None and element_name and element_name != name and depth < 4:
                    # `_, data = items` with `data["gtcloud"]` read here or by the
                    # code `data` is handed to: the element's own layout.
                    inner = self.layout_of_name(element_name, function_ast, env, depth + 1)
                    if inner[0] in ("dict", "tuple", "loader"):
                        elements.append(inner)
                        continue
                if spec is None and element_name:
                    spec = self.tensor_for(element_name, function_ast, env)
                elements.append(("tensor", spec))
            return ("tuple", elements)
        attrs = usage["attrs"] - tensor_methods
        if attrs and not usage["attrs"] & tensor_methods and not _converted(function_ast, name):
            return ("attrs", {a: ("tensor", self.tensor_for(a, function_ast, env, matches=attr_matcher(name, a))) for a in sorted(attrs)})
        return ("tensor", self.tensor_for(name, function_ast, env))

    def _callee(self, call, env, aliases=None):
        """(function ast, its parameter names, env) of a call of the user's own
        code: a module of the file (its forward), a method of an instance of
        the file's class, a function of the file; None otherwise."""
        callee = resolve(call.func, env) if not isinstance(call.func, ast.Name) else env.get(call.func.id, self.user.ns.get(call.func.id))
        if callee is None and isinstance(call.func, ast.Name) and aliases is not None:
            # `loss_fn = my_loss` earlier in the function.
            bound = aliases.get(call.func.id)
            if isinstance(bound, ast.Name):
                callee = env.get(bound.id, self.user.ns.get(bound.id))
        if isinstance(callee, StandIn) or callee is None:
            return None
        if isinstance(callee, nn.Module):
            node = self.user.class_ast_of(callee)
            function = methods_of(node).get("forward") if node is not None else None
            return (function, [a.arg for a in function.args.args][1:], {"self": callee}) if function is not None else None
        if inspect.ismethod(callee):
            function = method_ast(self.user.class_ast_of, callee.__self__, callee.__name__)
            return (function, [a.arg for a in function.args.args][1:], {"self": callee.__self__}) if function is not None else None
        if inspect.isfunction(callee) and getattr(callee, "__module__", None) == self.user.name:
            function = self.user.find_function(callee.__name__)
            return (function, [a.arg for a in function.args.args], {}) if function is not None else None
        return None

    def _target_through_calls(self, function_ast, matches, env):
        """A criterion's target in the user's function the value is handed to
        (`loss_fn(pred, y)` with `loss_fn = my_loss`, which calls `F.cross_entropy`)."""
        aliases = aliases_in(function_ast)
        for call in calls_in_order(function_ast):
            positions = [i for i, a in enumerate(call.args) if is_value(a, matches, aliases)]
            target = self._callee(call, env, aliases) if positions else None
            if target is None or positions[0] >= len(target[1]):
                continue
            callee_ast, names, callee_env = target
            spec = target_spec(callee_ast, name_matcher(names[positions[0]]), callee_env, self.plan)
            if spec is not None:
                return spec
        return None

    def _keys_through_calls(self, function_ast, name, env, depth=0):
        """Keys the user's code called with `name` reads of it (`model(batch)`
        whose forward reads `batch["image"]`): key -> (function, parameter, env)."""
        found = {}
        if function_ast is None or self.user is None or depth > 2:
            return found
        for call in calls_in_order(function_ast):
            positions = [i for i, a in enumerate(call.args) if isinstance(a, ast.Name) and a.id == name]
            if not positions:
                continue
            target = self._callee(call, env)
            if target is None:
                continue
            callee_ast, names, callee_env = target
            if positions[0] >= len(names):
                continue
            parameter = names[positions[0]]
            for key in usage_of(callee_ast, parameter)["keys"]:
                found.setdefault(key, (callee_ast, parameter, callee_env))
            for key, value in self._keys_through_calls(callee_ast, parameter, callee_env, depth + 1).items():
                found.setdefault(key, value)
        return found

    def _element(self, name, key, function_ast, env):
        """One entry of a dict argument: what the name it is bound to says it
        holds (`snet = nets["snet"]; snet.train()` is a model), else a tensor."""
        matches = key_matcher(name, key)
        for node in walk(function_ast):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and matches(node.value)
            ):
                alias = node.targets[0].id
                role = self.role(alias, function_ast)
                if role in ("model", "criterion", "optimizer", "sink", "config", "instance", "loader"):
                    parameter = inspect.Parameter(alias, inspect.Parameter.POSITIONAL_OR_KEYWORD)
                    value = self.value_for(parameter, function_ast, env, constructor=False)
                    if role == "model" and isinstance(value, nn.Module):
                        env[alias] = value
                    return ("value", value)
                break
        return ("tensor", self.tensor_for(_key_name(key), function_ast, env, matches=matches))

    def _unpacked_names(self, function_ast, name, count):
        for node in walk(function_ast):
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
        if kind == "value":
            return content
        if kind == "loader":
            return Loader([self.materialize(content) for _ in range(3)])
        if kind == "attrs":
            return types.SimpleNamespace(**{k: self.materialize(v) for k, v in content.items()})
        raise ValueError(kind)


def _converted(function, name):
    """Whether the code converts `name` as a tensor (`labels.type(LongTensor)`):
    a record's fields are read, never converted so."""
    return any(
        isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "type"
        and isinstance(node.func.value, ast.Name) and node.func.value.id == name and len(node.args) == 1
        for node in walk(function)
    )


def _numpy_input(function, name):
    """Whether the code takes `name` as a numpy array (`torch.from_numpy(x)`)."""
    for node in walk(function):
        if (
            isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id == name
            and ast.unparse(node.func).split(".")[-1] == "from_numpy"
        ):
            return True
    return False


# The names a parser's result usually goes by.
_PARSED_NAMES = {"args", "opt", "opts", "flags", "cmdl", "cmd_args", "cli_args"}


_BATCH_WORDS = {"batch", "batches", "data", "sample", "samples", "transition", "transitions", "experience", "minibatch", "obs", "state", "states", "item", "inputs", "x", "output", "outputs", "out", "result", "results"}


# Fields of a tensor, a model or a batch container, never of a config.
_NOT_CONFIG_FIELDS = {"shape", "data", "grad", "T", "mT", "device", "dtype", "requires_grad", "is_leaf", "grad_fn", "ndim", "real", "imag", "training", "weight", "bias"}


# Words of a setting's name (`lr`, `batch_size`, `log_interval`, `use_cuda`).
_SETTING_WORDS = {
    "lr", "learning", "rate", "gamma", "epochs", "epoch", "steps", "step", "batch", "size", "seed", "cuda", "gpu", "gpus",
    "momentum", "decay", "eps", "epsilon", "tau", "alpha", "beta", "dropout", "hidden", "dim", "num", "n", "clip",
    "norm", "log", "interval", "freq", "every", "save", "dir", "path", "optim", "optimizer", "workers", "warmup",
    "max", "min", "use", "no", "dry", "run", "iters", "iterations", "lambda", "coef", "coeff", "weight", "temperature",
    "discount", "capacity", "update", "target", "training", "train", "eval", "test", "verbose", "debug", "mode", "type",
}


def _fields_only(function_ast, name, usage):
    """Whether the code only reads settings off `name` (`cmdl.lr`,
    `hps.batch_size`): never calls it or a method of it, never indexes or
    iterates it, reads no tensor's field, and names a setting."""
    attrs = usage["attrs"]
    if not attrs or usage["called"] or usage["iterated"] or usage["keys"] or usage["indexes"] or usage["unpacked"] or attrs & _NOT_CONFIG_FIELDS:
        return False
    if (attrs & _TENSOR_ATTRS) - {"cuda", "type", "device", "half", "name"}:
        return False  # `x.is_cuda`, `x.ndim`: a tensor's own fields
    attrs = attrs - (_TENSOR_ATTRS - {"cuda"})
    for node in walk(function_ast):
        if (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == name
        ):
            return False
    return any(set(name_tokens(attr)) & _SETTING_WORDS for attr in attrs)


def _iterates_attribute(method, attribute):
    """Whether a method iterates `self.<attribute>` (`for x, y in self.testloader`,
    `iter(self.val_loader)`) and reads nothing of it a tensor has."""
    def is_it(expr):
        while isinstance(expr, ast.Call) and expr.args and _call_name(expr) in ("enumerate", "tqdm", "iter", "list"):
            expr = expr.args[0]
        return isinstance(expr, ast.Attribute) and expr.attr == attribute and isinstance(expr.value, ast.Name) and expr.value.id == "self"

    iterated = False
    for node in walk(method):
        if isinstance(node, (ast.For, ast.comprehension)) and is_it(node.iter):
            iterated = True
        elif isinstance(node, ast.Call) and _call_name(node) == "iter" and node.args and is_it(node.args[0]):
            iterated = True
        elif isinstance(node, ast.Attribute) and node.attr in _READ_AS_TENSOR and is_it(node.value):
            return False
    return iterated


def _field_read_as_tensor(function_ast, owner, attribute, env):
    """Whether the code reads `owner.attribute` as a tensor: indexes or slices
    it, calls a tensor's method on it, or hands it to a function of torch's
    (`torch.unsqueeze(...)`, `Variable(...)` imported from `torch.autograd`)."""
    matches = attr_matcher(owner, attribute)
    for node in walk(function_ast):
        if isinstance(node, ast.Subscript) and matches(node.value):
            return True
        if isinstance(node, ast.Attribute) and matches(node.value) and node.attr in _READ_AS_TENSOR | {"numpy", "type", "to", "cpu"}:
            return True
        if isinstance(node, ast.Call) and any(matches(a) for a in node.args):
            module = node.func.value if isinstance(node.func, ast.Attribute) else None
            if isinstance(module, ast.Name) and module.id == "torch":
                return True
            func = node.func
            while isinstance(func, ast.Call) and func.args and (_call_name(func) or "").startswith("__dl_"):
                func = func.args[0]  # the verifier's own wrapper of the call it watches
            if (getattr(resolve(func, env), "__module__", None) or "").split(".")[0] == "torch":
                return True
    return False


# What the code reads of a tensor and never of a loader or a dataset.
_READ_AS_TENSOR = frozenset({
    "size", "shape", "cuda", "view", "reshape", "dim", "ndim", "unsqueeze", "squeeze", "permute", "numel",
    "float", "long", "detach", "clone", "contiguous", "transpose",
})


def _next_target(function_ast, name):
    """`batch` in `batch = next(iter(loader))`, in `it = iter(loader); batch = next(it)`
    and in `batch = loader[i]`."""
    names = {name}
    for node in walk(function_ast):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "iter" and value.args and _iterates(value.args[0], name):
                names.add(node.targets[0].id)
    for node in walk(function_ast):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call):
            call = node.value
            if isinstance(call.func, ast.Name) and call.func.id == "next" and call.args and any(_iterates(call.args[0], n) for n in names):
                return node.targets[0]
    for node in walk(function_ast):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.value, ast.Subscript)
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id == name
            and not isinstance(node.value.slice, (ast.Constant, ast.Slice))
        ):
            return node.targets[0]
    return None


_DEFAULT = object()


class _SelfToNames(ast.NodeTransformer):
    """`self.x` -> `x`, to read a method as a function of its attributes."""

    def visit_Attribute(self, node):
        if isinstance(node.value, ast.Name) and node.value.id == "self":
            return ast.copy_location(ast.Name(node.attr, node.ctx), node)
        return self.generic_visit(node)


_HINTS = {int: "int", float: "float", bool: "bool", str: "str", "int": "int", "float": "float", "bool": "bool", "str": "str"}


def _hinted_value(parameter, name):
    """A value of the kind a plain type hint asks for (`in_features: int`); None otherwise."""
    kind = _HINTS.get(parameter.annotation) if isinstance(parameter.annotation, (type, str)) else None
    if kind is None:
        return None
    if kind == "bool":
        return False
    if kind == "str":
        return "default"
    value = number_for(name)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        value = 16
    if kind == "int":
        return int(value) if float(value).is_integer() and value >= 1 else (16 if value < 1 else int(value))
    return float(value)


_TENSOR_ATTRS = frozenset(dir(torch.Tensor)) | {"grad", "data", "shape", "device", "dtype", "T"}
