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
)


def methods_of(class_node):
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
        SYNTHESIZED[id(tensor)] = weakref.ref(tensor)
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
            init_ast = methods_of(node).get("__init__")
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
        if lowered in ("criterion", "crit", "loss_fn", "loss_func", "lossfn", "loss_function", "criteria") or lowered.endswith("criterion") or lowered.endswith("_loss_fn"):
            return "criterion"
        if lowered in CONFIG_NAMES and not (usage and usage["called"]):
            return "config"
        if tokens & SINK_WORDS and not is_model_name(name):
            return "sink"
        if usage and usage["attrs"] & {"append", "extend", "insert"}:
            return "list"
        if usage and usage["attrs"] & {"items", "update", "setdefault", "keys", "values"} and not usage["iterated"]:
            return "dict"
        if usage and usage["called"]:
            if "loss" in tokens or "metric" in tokens or "fn" in tokens or "func" in tokens:
                return "criterion"
            return "model"
        if is_model_name(name):
            return "model"
        if usage and usage["attrs"] & {"parameters", "named_parameters", "eval", "train", "state_dict", "modules", "children"}:
            return "model"
        if "loader" in lowered or lowered in ("batches", "dataloader", "data_iter", "iterator"):
            return "loader"
        if usage and usage["iterated"]:
            return "loader"
        if usage and (usage["keys"] or usage["unpacked"] or usage["indexes"]) and not tokens & (LABEL_WORDS | MASK_WORDS):
            return "batch"
        if lowered in ("batch", "data", "sample", "inputs_targets", "minibatch"):
            return "batch"
        if tokens & {"epochs", "epoch", "steps", "step", "iters", "iterations", "iter", "max", "num", "n", "idx", "id", "index", "k", "topk", "size", "len", "length", "rank", "seed", "count", "every", "freq", "interval", "bos", "eos", "sos", "pad", "start", "end", "token"} and not tokens & (TOKEN_WORDS - {"token"}):
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
        if tokens & LABEL_WORDS:
            return "labels"
        if tokens & MASK_WORDS:
            return "mask"
        if lowered in TOKEN_WORDS or tokens & {"ids", "tokens", "token"}:
            return "tokens"
        return "tensor"

    def value_for(self, parameter, function_ast, env, constructor):
        name = parameter.name
        has_default = parameter.default is not inspect.Parameter.empty
        role = self.role(name, function_ast)
        if role == "device":
            return "cpu"
        if role == "dtype":
            return torch.float32
        if has_default:
            default = parameter.default
            if role == "int" and isinstance(default, int) and not isinstance(default, bool):
                tokens = set(name_tokens(name))
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
        tokens = set(name_tokens(name))
        if role == "labels":
            return Spec("labels_float" if self.plan.labels == "float" else "long", (BATCH,), 2)
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
                method = methods_of(node).get(call.func.attr) if node is not None else None
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
        forward = methods_of(node).get("forward") if node is not None else None
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
