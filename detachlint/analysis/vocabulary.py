"""Torch's autograd vocabulary: the names the analyses and rules recognise.

One place for the words (which methods cut the graph, which copy, which ask
for gradients, which switch grad mode), so that two analyses cannot disagree
about what `x.cpu()` or `torch.enable_grad` does. A module that needs a
variant builds it from these sets in the open (`COPYING_METHODS - {...}`) and
says why. Project heuristics (name patterns, budgets) stay with their users.
tests/test_vocabulary.py fails when one of these sets is written out again
elsewhere.
"""

from __future__ import annotations

# --- Leaving the graph -----------------------------------------------------

# Methods returning the same values outside autograd.
DETACHING_METHODS = frozenset({"detach", "detach_"})
# Methods leaving torch with the values: a Python number or list, a numpy array.
TO_PYTHON_METHODS = frozenset({"item", "tolist", "numpy"})
# Methods returning integers about the tensor's size.
SIZE_METHODS = frozenset({"size", "dim", "ndimension", "numel", "nelement", "element_size"})
# Builtins whose result is a Python number, whatever they are given.
NUMBER_BUILTINS = frozenset({"float", "int", "bool", "len"})
# ... and `round`: of a tensor, a tensor whose gradient is zero, no graph worth following.
PYTHON_NUMBER_BUILTINS = NUMBER_BUILTINS | {"round"}
# The same, spelled through the builtins module.
QUALIFIED_PYTHON_NUMBER_BUILTINS = PYTHON_NUMBER_BUILTINS | {f"builtins.{name}" for name in PYTHON_NUMBER_BUILTINS}
# Builtins whose result carries no graph. Not `abs`: `abs(loss)` is `loss.abs()`, with its graph.
NO_GRAPH_BUILTINS = PYTHON_NUMBER_BUILTINS | {"str", "isinstance"}
# Builtins that read what an object is, not its values.
IDENTITY_BUILTINS = frozenset({"len", "isinstance", "type", "id"})
# Builtins that look at a value without keeping it.
INSPECTING_BUILTINS = NO_GRAPH_BUILTINS | {"print", "type", "repr", "format"}
# Methods returning the positions of elements.
INDEX_METHODS = frozenset({"argmax", "argmin", "argsort"})
# Tensor methods and torch functions whose result never requires grad
# (integer or boolean results, `Distribution.sample()` as opposed to
# `rsample()`): checked against torch 2.x, where `w.argmax().requires_grad`,
# `(w > 0).requires_grad` and `Normal(w, 1).sample().requires_grad` are False.
NO_GRAPH_METHODS = INDEX_METHODS | {
    "eq", "ne", "lt", "le", "gt", "ge", "equal", "isnan", "isinf",
    "isfinite", "isclose", "nonzero", "long", "int", "bool", "byte", "short", "char", "logical_and",
    "logical_or", "logical_not", "logical_xor", "item", "tolist", "numpy", "detach", "size", "numel",
    "dim", "count_nonzero", "bincount", "unique", "all", "any", "sample", "multinomial",
}
# Attributes that hold no graph: metadata, flags, `.grad`, a named tuple's `.indices`.
NO_GRAPH_ATTRIBUTES = frozenset({"indices", "shape", "dtype", "device", "requires_grad", "is_leaf", "grad", "grad_fn", "ndim"})
# ... and `.data`, the same storage outside autograd.
GRAPH_CUTTING_ATTRIBUTES = NO_GRAPH_ATTRIBUTES | {"data"}
# Attributes and methods that read a tensor's metadata, not its values.
TENSOR_METADATA = frozenset({
    "shape", "dtype", "device", "size", "dim", "ndim", "ndimension", "numel", "is_cuda", "is_leaf",
    "requires_grad", "grad_fn", "layout", "stride", "is_contiguous", "get_device", "names",
})
# Tensor methods whose result is not a tensor.
NOT_TENSOR_METHODS = TO_PYTHON_METHODS | SIZE_METHODS | {
    "data_ptr", "stride", "storage", "untyped_storage", "is_contiguous", "get_device", "type",
    "split", "chunk", "unbind", "tensor_split", "sort", "topk", "max", "min", "unique", "register_hook",
    "backward", "__len__", "all", "any",
}
# `torch.<name>` functions that return something other than a tensor.
NOT_TENSOR_FUNCTIONS = frozenset({
    "load", "save", "device", "dtype", "no_grad", "enable_grad", "inference_mode", "set_grad_enabled",
    "is_grad_enabled", "manual_seed", "seed", "initial_seed", "is_tensor", "is_floating_point",
    "is_complex", "numel", "compile", "get_default_dtype", "set_default_dtype", "typename", "finfo",
    "iinfo", "set_printoptions", "use_deterministic_algorithms", "get_rng_state", "set_rng_state",
    "broadcast_shapes", "result_type", "promote_types", "can_cast", "is_nonzero", "equal", "allclose",
    "split", "chunk", "unbind", "tensor_split", "meshgrid", "sort", "topk", "max", "min", "unique",
    # PackedSequence: its `.data` is a field, not the tensor's storage.
    "pack_padded_sequence", "pack_sequence",
})

# --- Copies, casts and views (the graph goes on) --------------------------

# Device and dtype casts. Modules have them too, and there they convert in
# place and return the module itself (`model.cuda()`).
DEVICE_DTYPE_CASTS = frozenset({"to", "cpu", "cuda", "float", "double", "half", "bfloat16"})
# Methods that keep a value as it is, graph or no graph: `output.clone().detach()`.
COPYING_METHODS = DEVICE_DTYPE_CASTS | {"clone", "contiguous", "type_as"}
# Methods reshaping a tensor, its graph going on.
RESHAPING_METHODS = frozenset({"view", "reshape", "squeeze", "unsqueeze", "permute", "transpose", "flatten"})
# Methods a tensor has and a module does not: a value they are called on is
# no module (`.to()` on it is a copy, not in place).
TENSOR_ONLY_METHODS = SIZE_METHODS | RESHAPING_METHODS | INDEX_METHODS | frozenset({"item", "numpy", "unsqueeze_", "squeeze_"})
# Conversions whose arguments are devices, dtypes or shapes: the result is the receiver's values.
CONVERSIONS = DEVICE_DTYPE_CASTS | RESHAPING_METHODS | {"type", "contiguous", "clone"}
# Methods whose result shares storage with the receiver.
VIEW_METHODS = frozenset({
    "view", "view_as", "squeeze", "unsqueeze", "permute", "transpose", "t", "expand", "expand_as",
    "narrow", "select", "unflatten", "diagonal", "movedim", "swapaxes", "unfold", "as_strided", "T", "mT",
})
# Reductions returning (values, indices) when given a dimension: `torch.max(x, 1)`.
VALUES_AND_INDICES = frozenset({"max", "min", "median", "mode", "sort", "topk", "kthvalue", "cummax", "cummin"})
# Methods and torch functions returning a tuple of views.
SPLITTING_METHODS = frozenset({"split", "chunk", "unbind", "tensor_split", "hsplit", "vsplit", "dsplit"})
# Methods that end in `_` but do not change the tensor's values.
NOT_VALUE_EDITS = frozenset({
    "requires_grad_", "share_memory_", "retain_grad_", "record_stream_", "pin_memory_", "detach_",
    "grad_fn_", "rename_", "refine_names_", "align_to_",
})

# --- New tensors ------------------------------------------------------------

# `torch.<name>` factories: a new leaf, with no graph unless `requires_grad=True`.
FACTORIES = frozenset({
    "tensor", "zeros", "ones", "empty", "full", "rand", "randn", "randint", "arange",
    "linspace", "eye", "zeros_like", "ones_like", "empty_like", "full_like", "rand_like",
    "randn_like", "as_tensor", "from_numpy",
})
# Factories that take the new tensor's size as arguments.
SIZED_FACTORIES = frozenset({"zeros", "ones", "empty", "full", "rand", "randn", "randint", "Tensor", "FloatTensor"})
# torch functions making new values from a size or a shape only: never a graph, never a cut.
NEW_VALUE_FUNCTIONS = frozenset(
    {f"torch.{name}" for name in SIZED_FACTORIES | {"arange", "linspace", "eye", "randperm"}}
    | {f"torch.{name}_like" for name in ("zeros", "ones", "empty", "full", "rand", "randn", "randint")}
)
# Constructors that copy their data into a new tensor with no graph:
# `torch.tensor([lp1, lp2])` of tensors that require grad gives a leaf
# that does not (torch warns, and keeps the values only).
COPYING_CONSTRUCTORS = frozenset({"torch.tensor", "torch.Tensor", "torch.FloatTensor", "torch.DoubleTensor"})
# The deprecated `Variable` wrapper.
VARIABLE_CLASSES = frozenset({"torch.autograd.Variable", "torch.autograd.variable.Variable"})

# --- Gradients and optimizer steps -----------------------------------------

# Methods that run backward: a tensor's, and Lightning's `self.manual_backward(loss)`.
BACKWARD_METHODS = frozenset({"backward", "manual_backward"})
# Functions that compute gradients.
GRADIENT_FUNCTIONS = frozenset({"torch.autograd.grad", "torch.autograd.backward"})
# `optimizer.step()`, `scaler.step(optimizer)`, `xm.optimizer_step(optimizer)`.
OPTIMIZER_STEPS = frozenset({"step", "optimizer_step"})
# In-place edits that clear a `.grad` tensor.
GRAD_CLEARING_METHODS = frozenset({"zero_", "fill_", "mul_", "detach_", "copy_", "requires_grad_"})

# --- Grad mode ----------------------------------------------------------------

# Context managers and decorators that set grad mode, as `names.qualified`
# spells them (`torch.autograd.grad_mode.no_grad` is `torch.no_grad`).
GRAD_MODE_MANAGERS = frozenset({"torch.no_grad", "torch.inference_mode", "torch.set_grad_enabled", "torch.enable_grad"})
# Those that act only when entered or applied: `torch.set_grad_enabled(False)`
# switches grad mode when called.
ENTERED_GRAD_MODE_MANAGERS = GRAD_MODE_MANAGERS - {"torch.set_grad_enabled"}

# --- Modules ------------------------------------------------------------------

# `nn.Module`'s own methods: `model.eval()` is torch's, whatever a class
# of the file defines under that name.
MODULE_API = frozenset(
    """add_module apply bfloat16 buffers children compile cpu cuda double eval extra_repr float
    forward get_buffer get_extra_state get_parameter get_submodule half ipu load_state_dict modules
    named_buffers named_children named_modules named_parameters parameters register_backward_hook
    register_buffer register_forward_hook register_forward_pre_hook register_full_backward_hook
    register_full_backward_pre_hook register_module register_parameter requires_grad_
    set_extra_state share_memory state_dict to to_empty train type xpu zero_grad""".split()
)
# Module methods yielding its parameters, or its submodules.
PARAMETER_ITERATORS = frozenset({"parameters", "named_parameters"})
SUBMODULE_ITERATORS = frozenset({"modules", "children"})
# Module methods that return the module itself.
MODULE_RETURNING_SELF = DEVICE_DTYPE_CASTS | {"train", "eval", "requires_grad_"}

# --- Containers -----------------------------------------------------------------

# Methods of a container that store their arguments in it.
STORING_METHODS = frozenset({"update", "append", "extend", "insert", "setdefault", "add"})
# Methods of a container that only read it.
READING_METHODS = frozenset({"items", "values", "keys", "get", "copy", "index", "count", "pop", "__getitem__"})
