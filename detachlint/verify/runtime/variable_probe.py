"""The probe of DL701 and DL702 (`torch.autograd.Variable(...)`).

The call on the finding's line, watched as it runs: the tensor it wraps
(its graph), the tensor it returns (graph, leaf, shared storage), the
warnings it gives; with `volatile=True`, the grad mode at the line and
whether the next model call after it records a graph. A batch the
reproduction made up for a function's argument leaves the verdict to the
callers; one of the script's own data source (a loader it iterates, or the
samples a dataset holds whole) stands for the program's batches, which
carry no graph either. A call inside a lambda the line binds is watched
on every call the file's own code makes of the lambda.
"""

import ast
import contextlib
import copy
import sys
import warnings

import torch
from torch import nn

from detachlint.verify.runtime.standins import MADE_AT_ENTRY, Enough, Inconclusive, is_synthesized, tensors_in
from detachlint.verify.runtime.observe import BASIS, describe_error, inputs_requiring_grad, notes, running_attempt
from detachlint.verify.runtime.user_code import SynthesizedData, find_working

_VOLATILE = "volatile was removed"


def _the_call(statement, spec):
    """The `Variable(...)` call the finding points at, in `statement`."""
    calls = [node for node in ast.walk(statement) if isinstance(node, ast.Call) and node.lineno == spec["line"]]
    named = [node for node in calls if ast.unparse(node.func).split(".")[-1] == "Variable"]
    exact = [node for node in calls if node.col_offset == spec["column"] - 1]
    # `Variable(x).cuda()`: the outer call starts at the same column; the wrapper is the finding.
    exact = [node for node in exact if node in named] or exact
    if exact:
        return exact[0]
    return named[0] if len(named) == 1 else None


# Methods that move or reshape data without computing anything from it.
_MOVES = {"cuda", "cpu", "to", "float", "double", "half", "long", "int", "contiguous", "clone", "view", "reshape", "squeeze", "unsqueeze", "type", "pin_memory", "t"}


def _made_up(value):
    """A tensor the reproduction synthesized, or a view of one (`inputs[i:j]`)."""
    return isinstance(value, torch.Tensor) and (is_synthesized(value) or (value._base is not None and is_synthesized(value._base)))


def _data_root(node):
    """`x` in `x`, `x[i:j]`, `x.cuda()`, `x.float()[0]`: the name whose data the
    expression only moves or slices; None when it computes something."""
    while True:
        if isinstance(node, ast.Name):
            return node.id
        if isinstance(node, ast.Subscript):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MOVES:
            node = node.func.value
        else:
            return None


def _lambda_name(statement, call):
    """`Variable` for a call inside `Variable = lambda *a: ...` on the line; None otherwise."""
    if not isinstance(statement, ast.Assign) or not isinstance(statement.value, ast.Lambda):
        return None
    if not any(node is call for node in ast.walk(statement.value)):
        return None
    names = [t.id for t in statement.targets if isinstance(t, ast.Name)]
    return names[0] if names else None


def _read_name(frame, name):
    if name is None:
        return None
    return frame.f_locals[name] if name in frame.f_locals else frame.f_globals.get(name)


def _data_source(*values):
    """What of the script's data source (a loader or dataset the script
    iterates or reads whole, here synthesized) one of `values` holds or
    views, as words for the evidence; None when they came from elsewhere (a
    function's made-up argument)."""
    pointers = {
        value.untyped_storage().data_ptr() for value in values if isinstance(value, torch.Tensor) and value.numel()
    } - {0}
    run = running_attempt()
    if not pointers or run is None or run.user is None:
        return None
    return next((words for words, tensor in _source_tensors(run) if tensor.untyped_storage().data_ptr() in pointers), None)


def _source_tensors(run):
    """(words for the evidence, tensor) for each tensor the data sources the attempt made hold."""
    for words, batches in _sources(run):
        if isinstance(batches, (list, tuple)):
            yield from ((words, tensor) for tensor in tensors_in(list(batches)) if tensor.numel())


def _sources(run):
    """(words for the evidence, batches) of each data source the attempt made."""
    synthesized = [v for v in list(run.user.ns.values()) if isinstance(v, SynthesizedData)]
    batch = "a batch of the script's data source `{}`"
    sources = [(batch.format(vars(v)["_dl_name"]), vars(v).get("_dl_batches")) for v in synthesized]
    # A dataset's samples read whole (`test_data.data[:100]`), made as its batches are.
    sources += [
        (f"samples the script's data source `{vars(v)['_dl_name']}` holds (`{vars(v)['_dl_name']}.{attribute}`)", [tensor])
        for v in synthesized
        for attribute, tensor in vars(v)["_dl_fields"].items()
    ]
    # A module-level data source a function reads (`for x, y in train_loader:`
    # in `train(epoch)`), given synthesized batches as the program's input.
    sources += [(batch.format(name), run.user.ns.get(name)) for name in getattr(run.synth, "data_globals", None) or ()]
    return sources


@contextlib.contextmanager
def _made_up_inputs_requiring_grad(kept, flipped):
    """`inputs_requiring_grad`, but the batches of the data sources stay as the
    program's are, without a graph; those it kept so go to `kept`, the
    count of inputs it made require grad to `flipped`."""
    run = running_attempt()
    made = run is not None and run.user is not None
    data = {tensor.untyped_storage().data_ptr() for _, tensor in _source_tensors(run)} if made else set()

    def keep(tensor):
        if tensor.numel() and tensor.untyped_storage().data_ptr() in data:
            kept.append(tensor)
            return True
        return False

    with inputs_requiring_grad(keep=keep) as count:
        flipped.append(count)
        yield count


_NOTHING_CALLED = "the call is in the lambda the line binds to `{}`, which nothing the reproduction ran called: the file's calls of it decide what it wraps"
_LAMBDA_CALLS = 24  # calls of a lambda wrapper watched before the run stops


def _shared(wrapped, result):
    return isinstance(wrapped, torch.Tensor) and isinstance(result, torch.Tensor) and result.untyped_storage().data_ptr() == wrapped.untyped_storage().data_ptr()


def _calling_line(spec):
    """The line of the user's file that called the lambda (the frame above it)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename != spec["path"]:
        frame = frame.f_back
    frame = frame.f_back if frame is not None else None  # the lambda's own frame, then its caller
    while frame is not None and frame.f_code.co_filename != spec["path"]:
        frame = frame.f_back
    return frame.f_lineno if frame is not None else None


def _tensor_state(value, source=None):
    if not isinstance(value, torch.Tensor):
        return None
    return {
        "requires_grad": value.requires_grad,
        "grad_fn": type(value.grad_fn).__name__ if value.grad_fn is not None else None,
        "is_leaf": value.is_leaf,
        # Synthesized data, also moved or sliced on the way (`feature.cuda()`).
        "synthesized": _made_up(value) or _made_up(source),
    }


def _watch_variable(spec, budget, volatile, around=None):
    seen = {}
    depth = [0]

    def spy(function):
        def call(*args, **kwargs):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                result = function(*args, **kwargs)
            if seen.get("attempt") is not running_attempt():
                # A new attempt (an earlier one stopped, a model call unfinished): it starts afresh.
                for key in ("call", "model", "calls"):
                    seen.pop(key, None)
                seen["attempt"] = running_attempt()
            if seen.get("lambda"):
                # The lambda's calls are the file's: each one's wrapped value, up to a few.
                wrapped = args[0] if args else kwargs.get("data")
                calls = seen.setdefault("calls", [])
                calls.append({"wrapped": _tensor_state(wrapped), "result": _tensor_state(result), "line": _calling_line(spec), "same_object": result is wrapped,
                              "shared": _shared(wrapped, result)})
                if len(calls) >= _LAMBDA_CALLS:
                    raise Enough()
            elif "call" not in seen:
                wrapped = args[0] if args else kwargs.get("data")
                source = _read_name(sys._getframe(1), seen.get("root"))
                shared = (
                    isinstance(wrapped, torch.Tensor) and isinstance(result, torch.Tensor)
                    and result.untyped_storage().data_ptr() == wrapped.untyped_storage().data_ptr()
                )
                seen["call"] = {
                    "wrapped": _tensor_state(wrapped, source),
                    "result": _tensor_state(result),
                    "same_object": result is wrapped,
                    "shared": shared,
                    "warnings": [str(w.message) for w in caught],
                    "grad_enabled": torch.is_grad_enabled(),
                    "volatile": kwargs.get("volatile"),
                    "data_source": _data_source(wrapped, source),
                }
                depth[0] = 0  # module calls from here on are the ones watched
                if not volatile:
                    raise Enough()
            return result

        return call

    def rewrite(statement):
        copied = copy.deepcopy(statement)
        node = _the_call(copied, spec)
        if node is None:
            return [statement]
        seen["text"] = ast.unparse(node)
        seen["wrapped_text"] = ast.unparse(node.args[0]) if node.args else None
        seen["root"] = _data_root(node.args[0]) if node.args else None
        seen["lambda"] = _lambda_name(copied, node)
        node.func = ast.Call(ast.Name("__dl_spy__", ast.Load()), [node.func], [])
        return [copied]

    def pre(module, args):
        depth[0] += 1

    def post(module, args, output):
        depth[0] -= 1
        if depth[0] == 0 and "call" in seen and "model" not in seen:
            tensors = tensors_in(output)
            tensor = next((t for t in tensors if t.requires_grad), tensors[0] if tensors else None)
            if tensor is not None:
                seen["model"] = (type(module).__name__, _tensor_state(tensor))
                raise Enough()

    handles = []
    if volatile:
        handles = [
            nn.modules.module.register_module_forward_pre_hook(pre),
            nn.modules.module.register_module_forward_hook(post),
        ]
    try:
        run = find_working(spec, rewrite=rewrite, helpers={"__dl_spy__": spy}, budget=budget, around=around)
    except Inconclusive as error:
        if seen.get("lambda") and not seen.get("calls") and str(error).startswith(f"line {spec['line']} never ran"):
            # Nothing in the run called the lambda (its line runs when it is called).
            raise Inconclusive(_NOTHING_CALLED.format(seen["lambda"])) from None
        if "call" not in seen and not seen.get("calls"):
            raise
        run = None  # it ran past the call before failing: what it saw stands
    finally:
        for handle in handles:
            handle.remove()
    return run, seen


def probe_variable_call(spec, budget):
    """What the wrapper did to the tensor it wraps, as the message claims."""
    message = spec["message"]
    volatile = message.startswith("`volatile=")
    made_before = MADE_AT_ENTRY[0]
    run, seen = _watch_variable(spec, budget, volatile)
    # Inputs made up before the code ran, over every attempt: 0 means a run
    # again with made-up inputs requiring grad would flip none, so run the same.
    made_up = MADE_AT_ENTRY[0] - made_before
    suffix = notes(run) if run is not None else ""
    if "text" not in seen:
        raise Inconclusive("the finding's `Variable(...)` call could not be found on its line")
    call = seen.get("call")
    if seen.get("lambda") and seen.get("calls"):
        return _lambda_calls(spec, budget, seen, suffix)
    if call is None:
        if run is not None and run.error is not None:
            raise Inconclusive(describe_error(run.error, spec, run))
        if seen.get("lambda") and run is not None and run.hits:
            # The lambda ran, but never through this call (a branch not taken: `.cuda() if USE_CUDA else ...`).
            raise Inconclusive(f"the lambda the line binds to `{seen['lambda']}` ran {run.hits} time{'s' if run.hits > 1 else ''} in the reproduction without making this call" + suffix)
        if seen.get("lambda"):
            # A wrapper the line only defines: its callers decide what it wraps.
            raise Inconclusive(_NOTHING_CALLED.format(seen["lambda"]) + suffix)
        raise Inconclusive("the call never ran with synthesized inputs" + suffix)
    text, wrapped_text = seen["text"], seen["wrapped_text"] or "its argument"
    wrapped, result = call["wrapped"], call["result"]
    if wrapped is None or result is None:
        raise Inconclusive(f"`{wrapped_text}` was not a tensor when `{text}` ran with synthesized inputs" + suffix)
    if volatile:
        if "model" not in seen and call["grad_enabled"] and run is not None and run.error is not None:
            raise Inconclusive(describe_error(run.error, spec, run))
        if "already off" in message:  # DL702: the flag claimed to do nothing here
            if call["grad_enabled"]:
                return "refuted", f"autograd was on when `{text}` ran, so the ignored flag leaves a graph to be built" + suffix
            return "confirmed", f"autograd was off when `{text}` ran: the ignored flag changes nothing here" + suffix
        return _volatile(seen, call, text, suffix)
    shares = "sharing its storage" if call["shared"] else "with storage of its own"
    returned = f"`{text}` returned {'the same tensor' if call['same_object'] else 'a new tensor ' + shares} (is_leaf={result['is_leaf']}, requires_grad={result['requires_grad']})"
    had = f"`{wrapped_text}`: requires_grad={wrapped['requires_grad']}, grad_fn={wrapped['grad_fn']}"
    source = call["data_source"]
    if wrapped["synthesized"] and not wrapped["requires_grad"] and (source is None or "cuts the graph" in message):
        # Made up by the reproduction, not computed by the code: what the wrapper
        # does to it is torch's behaviour, not the program's; the callers decide what it holds.
        who = "what the script's data source really yields decides" if spec["target"].get("script") else "the file's callers decide"
        raise Inconclusive(f"`{wrapped_text}` holds data the reproduction synthesized (requires_grad=False), not a value the code computed: {who} whether it carries a graph" + suffix)
    if source is not None and wrapped["synthesized"]:
        # Its storage is the batch's own: models or values stood in elsewhere in the run computed none of it.
        BASIS["untouched"] = f"`{wrapped_text}` holds {source} itself (the same storage), which no stand-in computed"
    if wrapped["synthesized"] and not wrapped["requires_grad"]:
        # A batch of the script's own data source (a loader, a dataset read from
        # files): the program's batches carry no graph either, so what the
        # wrapper does to this one is what it does in the program.
        had = f"`{wrapped_text}`, {source}: requires_grad={wrapped['requires_grad']}, grad_fn={wrapped['grad_fn']}"
    if "makes a new leaf" in message:
        if result["is_leaf"] and result["requires_grad"] and call["shared"] and not call["same_object"]:
            return "confirmed", f"{returned}; {had}" + suffix
        return "refuted", f"{returned}; {had}" + suffix
    cut = wrapped["requires_grad"] and not result["requires_grad"]
    if cut and "does nothing" in message:
        return "refuted", f"{had}; {returned}: it cut a graph, it did not leave the tensor as it was" + suffix
    if cut:
        # The tensor had a graph (or was a parameter), the result has none.
        return "confirmed", f"{had}; {returned}, grad_fn=None: no gradient flows back through it into `{wrapped_text}`" + suffix
    if "does nothing" in message:
        if call["shared"] and not result["requires_grad"]:
            return "confirmed", f"{had}; {returned}: the same data, nothing changed" + suffix
        what = "a new leaf that requires grad" if result["requires_grad"] else "a copy"
        return "refuted", f"{had}; {returned}: it made {what}" + suffix
    if "cuts the graph" in message:
        # No graph, perhaps only because the synthesized inputs carry none: again, with inputs that require grad.
        _, again = _watch_variable(spec, budget, volatile, around=inputs_requiring_grad)
        other = again.get("call", {}).get("wrapped") if again.get("call") else None
        if other is not None and not other["requires_grad"]:
            return "refuted", f"{had}, also with the synthesized inputs requiring grad; {returned}: there was no graph to cut" + suffix
        raise Inconclusive(f"{had} with synthesized inputs: what the callers pass decides whether there is a graph to cut" + suffix)
    detached = call["shared"] and not call["same_object"] and not result["requires_grad"]
    if source is not None and detached:
        # "returns `x.detach()`": an alias of a batch that carries no graph, as the program's batches do.
        return "confirmed", f"{had}; {returned}: `{wrapped_text}.detach()`, the same data with nothing changed" + suffix
    if detached and not wrapped["synthesized"]:
        # A value the code computed (a factory, `x.data.new(...)`): if it still carries
        # no graph when every synthesized input requires grad, its lack of one is the
        # program's own, not the inputs'.
        kept, flipped = [], []
        if made_up == 0 and run is not None and run.grad_off_line is None:
            # Nothing to flip, and autograd on as it would be: the run again would be this one.
            other = wrapped
        else:
            _, again = _watch_variable(spec, budget, volatile, around=lambda: _made_up_inputs_requiring_grad(kept, flipped))
            other = again.get("call", {}).get("wrapped") if again.get("call") else None
        if other is not None and not other["requires_grad"]:
            count = flipped[-1] if flipped else 0
            if count:
                again_with = f"also with the run's {count} made-up input{'s' if count > 1 else ''} requiring grad"
                if kept:
                    again_with += " (the data source's batches kept without a graph, as the program's are)"
            else:
                again_with = "and the run made up no input that could have given it one"
            return "confirmed", f"{had}, {again_with}; {returned}: `{wrapped_text}.detach()`, the same data with nothing changed" + suffix
    raise Inconclusive(f"{had}; {returned}: with no graph on `{wrapped_text}` at these inputs, the wrapper had nothing to cut" + suffix)


def _lambda_calls(spec, budget, seen, suffix):
    """The verdict on a wrapper a lambda holds, from the file's own calls of
    it that the run made: a call that cut a graph confirms the cut; when no
    call's wrapped value had a graph, the wrapper did nothing here, which
    holds only if no input the run made up could have given one a graph."""
    name, text = seen["lambda"], seen["text"]
    calls = seen["calls"]
    lines = sorted({c["line"] for c in calls if c["line"] is not None})
    # Each as "line N", which a notebook's evidence says as a cell's line.
    where = f" (from {', '.join(f'line {n}' for n in lines)})" if lines else ""
    made = f"the {len(calls)} calls of `{name}` the run made{where}" if len(calls) > 1 else f"the one call of `{name}` the run made{where}"
    each = "each " if len(calls) > 1 else ""
    if any(c["wrapped"] is None or c["result"] is None for c in calls):
        raise Inconclusive(f"of {made}, one wrapped no tensor: `{text}` decides nothing there" + suffix)
    cut = next((c for c in calls if c["wrapped"]["requires_grad"] and not c["result"]["requires_grad"]), None)
    if cut is not None:
        return "confirmed", (
            f"of {made}, the one from line {cut['line']} wrapped a tensor with requires_grad=True (grad_fn={cut['wrapped']['grad_fn']}) "
            f"and `{text}` returned requires_grad=False, grad_fn=None: no gradient flows back through it" + suffix
        )
    if any(c["wrapped"]["synthesized"] for c in calls):
        raise Inconclusive(f"of {made}, one wrapped data the reproduction synthesized (requires_grad=False): the file's callers decide whether it carries a graph" + suffix)
    if not all(c["shared"] and not c["same_object"] and not c["result"]["requires_grad"] for c in calls):
        raise Inconclusive(f"{made} wrapped tensors with no graph, but not every one returned a tensor sharing its storage without one" + suffix)
    kept, flipped = [], []
    _, again = _watch_variable(spec, budget, False, around=lambda: _made_up_inputs_requiring_grad(kept, flipped))
    if any(c["wrapped"] is not None and c["wrapped"]["requires_grad"] for c in again.get("calls", [])) or not again.get("calls"):
        raise Inconclusive(f"{made} wrapped tensors with no graph, but not when the run's made-up inputs required grad: the callers decide" + suffix)
    again_with = "the run made up no input that could have given one a graph" if not (flipped and flipped[-1]) else f"also with the run's {flipped[-1]} made-up inputs requiring grad"
    return "confirmed", (
        f"{made} {each}wrapped a tensor with requires_grad=False, grad_fn=None, and {again_with}; {each or 'it '}returned a new tensor sharing its storage "
        f"(requires_grad=False): `{text}` was the `.detach()` of its argument, the same data with nothing changed, so here the wrapper does nothing" + suffix
    )


def _volatile(seen, call, text, suffix):
    warned = next((w for w in call["warnings"] if _VOLATILE in w), None)
    said = f"`{text}` warned \"{warned}\"" if warned else f"`{text}` gave no warning"
    if not call["grad_enabled"]:
        return "refuted", f"{said}; autograd was off when the line ran, so no graph is built" + suffix
    if not call["volatile"]:
        # `volatile=flag` with the flag false here: a graph is what the code asked for.
        raise Inconclusive(f"`volatile` was {call['volatile']!r} when `{text}` ran with synthesized inputs, so a graph was wanted there" + suffix)
    model = seen.get("model")
    if model is None:
        raise Inconclusive(f"{said}; autograd was on at the line, but no module ran after it with synthesized inputs" + suffix)
    name, state = model
    if state["requires_grad"]:
        return "confirmed", f"{said}; autograd was on at the line, and the next module call (`{name}`) returned requires_grad=True (grad_fn={state['grad_fn']}): it recorded a graph" + suffix
    return "refuted", f"{said}; the next module call (`{name}`) returned requires_grad=False: no graph was recorded" + suffix
