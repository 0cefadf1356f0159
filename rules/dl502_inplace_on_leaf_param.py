from __future__ import annotations

from typing import Optional, Set

import libcst as cst

from detachlint.analysis.inplace import InplaceEdits, written_tensor
from detachlint.analysis.loops import LoopFacts
from detachlint.analysis.names import dotted
from detachlint.analysis.values import Holds, grad_flag_set
from detachlint.analysis.views import Views
from detachlint.rule import Invalid, Rule


class InplaceOnLeafParam(Rule):
    """In-place edit of a parameter or a `requires_grad=True` leaf with autograd on.

    ## What it does
    Flags in-place edits (`w -= lr * w.grad`, `p.add_(noise)`,
    `w[0] = 0`, `self.weight.normal_()`) of a tensor that is a leaf and
    requires grad: an `nn.Parameter`, a module's declared parameter, the
    `.weight`/`.bias` of a submodule reached from a model
    (`model.encoder.layer[i].dense.weight[:, j] += v`), `p` in
    `for p in model.parameters()`, a factory result made with
    `requires_grad=True`, or a tensor made a leaf with `.requires_grad_()` /
    `x.requires_grad = True`, when no `torch.no_grad()` (or
    `inference_mode`, `set_grad_enabled(False)`) is active. A helper's
    parameter counts as what the calls in the file pass for it, when they all agree
    (`fill_sinusoids(self.pos.weight)`), and views and slices of such a
    tensor count as the tensor (`m = m.view(-1); m[i] = 0`). A tensor
    passed to a function of the file that calls `requires_grad_()` on its
    parameter is such a leaf after the call, also on the next pass of a
    loop that edits it before the call.

    ## Why is this bad?
    autograd refuses to edit a leaf that requires grad in place while it is
    recording: `RuntimeError: a leaf Variable that requires grad is being
    used in an in-place operation`. Hand-written SGD updates, weight
    initialisation and noise injection hit it the first time they run. The
    edit is meant to happen outside the graph: under `torch.no_grad()`
    (what `torch.optim` and `torch.nn.init` do internally).

    ## Example
    ```python
    import torch

    def fit(x, y, steps=100, lr=0.1):
        w = torch.zeros(x.shape[1], requires_grad=True)
        for _ in range(steps):
            loss = ((x @ w - y) ** 2).mean()
            loss.backward()
            w -= lr * w.grad
            w.grad.zero_()
        return w
    ```

    Use instead:
    ```python
    import torch

    def fit(x, y, steps=100, lr=0.1):
        w = torch.zeros(x.shape[1], requires_grad=True)
        for _ in range(steps):
            loss = ((x @ w - y) ** 2).mean()
            loss.backward()
            with torch.no_grad():
                w -= lr * w.grad
            w.grad.zero_()
        return w
    ```

    ## Not flagged
    - Edits under `torch.no_grad()`, `torch.inference_mode()` or
      `torch.set_grad_enabled(False)`, in functions decorated with them or
      only called under them.
    - Edits through `.data` (DL101 and DL103 look at those) and of `.grad`.
    - Tensors that are not known to be leaves requiring grad: a member of
      the module that is a buffer or a plain tensor, activations, data.
    - A member declared `nn.Parameter(t, requires_grad=False)`: a running
      statistic kept as a parameter, which in-place edits do not disturb.
    - Methods that end in `_` but change no value (`share_memory_()`,
      `requires_grad_()`): autograd allows them on a leaf.
    - Weights of a module the file freezes (`requires_grad_(False)`,
      `requires_grad = False`) before editing them.
    - A helper's parameter when some call passes something else, or the
      helper is only called under `torch.no_grad()`.
    - A tensor handed to a helper that flags its parameter only after
      rebinding it unconditionally (`mask = mask.clone(); mask.requires_grad_()`),
      or edited on a fresh copy made on every pass of the loop.
    - `requires_grad_()` and other methods that do not change values; test
      code.

    ## Fix safety
    No fix: where the no-grad block should start and end (one statement, or
    the whole update) is for the author to decide.

    ## Verification
    The probe runs the code to the edit: confirmed when the statement raises
    "a leaf Variable that requires grad is being used in an in-place
    operation", refuted when it runs through. An edit of a function's
    argument the reproduction would have to make up says nothing; when a
    class of the file calls the function (`fill(self.pos.weight)` in its
    constructor), the probe runs it through that class, which passes the
    program's own tensor: that run can confirm, but its running through
    refutes nothing (other calls may pass other tensors).

    ## References
    - PyTorch docs, "Locally disabling gradient computation"; the source of
      `torch.nn.init`, which edits parameters under `torch.no_grad()`.
    """

    code = "DL502"
    name = "inplace-on-leaf-param"
    message = "`{edit}` raises \"a leaf Variable that requires grad is being used in an in-place operation\": `{tensor}` is {what}; edit it under `torch.no_grad()`"
    harm = "raises"
    default_enabled = True

    valid = [
        # Moved to shared memory for worker processes: no value changes.
        """
        import torch

        class Trainer:
            def __init__(self):
                self.log_alpha = torch.zeros(1, requires_grad=True)
                self.optimizer = torch.optim.Adam([self.log_alpha], lr=3e-4)

        trainer = Trainer()
        trainer.log_alpha.share_memory_()
        """,
        # The same helper, its update under no_grad.
        """
        import torch
        from torch import nn

        def sgd(tensors, rate):
            with torch.no_grad():
                for t in tensors:
                    t -= rate * t.grad

        def fit(m, pairs, score, rate):
            for x, y in pairs:
                m.zero_grad()
                score(m(x), y).backward()
                sgd(m.parameters(), rate)

        head = nn.Linear(4, 3)
        fit(head, [(torch.randn(8, 4), torch.randint(0, 3, (8,)))], nn.CrossEntropyLoss(), 0.1)
        """,
        # A fresh mask on every pass: the flagged tensor is never edited.
        """
        import torch

        def head_importance(model, loader, head_mask):
            head_mask.requires_grad_(True)
            for x, y in loader:
                model(x, y, head_mask=head_mask).backward()
            return head_mask.grad.abs()

        def prune(model, loader, rounds, n):
            importance = torch.zeros(4, 8)
            for _ in range(rounds):
                new_mask = torch.ones(4, 8).view(-1)
                new_mask[importance.view(-1).argsort()[:n]] = 0.0
                new_mask = new_mask.view(4, 8)
                importance = head_importance(model, loader, new_mask)
            return importance
        """,
        # Under no_grad.
        """
        import torch

        def sgd(params, lr):
            with torch.no_grad():
                for p in params:
                    p -= lr * p.grad
        """,
        # Through .data and on .grad.
        """
        from torch import nn

        def perturb(model: nn.Module, scale):
            for p in model.parameters():
                p.data.add_(scale)
                p.grad.zero_()
        """,
        # A buffer, not a parameter.
        """
        import torch
        from torch import nn

        class Norm(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.register_buffer("running_mean", torch.zeros(n))
                self.weight = nn.Parameter(torch.ones(n))

            def update(self, mean):
                self.running_mean.mul_(0.9).add_(0.1 * mean)
        """,
        # A decorated helper.
        """
        import torch
        from torch import nn

        @torch.no_grad()
        def ema_update(ema: nn.Module, model: nn.Module, decay=0.999):
            for e, p in zip(ema.parameters(), model.parameters()):
                e.mul_(decay).add_(p, alpha=1 - decay)
        """,
        # requires_grad_ does not edit values; a test.
        """
        import torch
        from torch import nn

        def freeze(model: nn.Module):
            for p in model.parameters():
                p.requires_grad_(False)

        def test_inplace_raises():
            w = torch.zeros(2, requires_grad=True)
            try:
                w.add_(1)
            except RuntimeError:
                pass
        """,
        # A running statistic declared as a frozen parameter.
        """
        import torch
        from torch import nn

        class PathLengthPenalty(nn.Module):
            def __init__(self, beta):
                super().__init__()
                self.beta = beta
                self.steps = nn.Parameter(torch.tensor(0.0), requires_grad=False)
                self.exp_sum_a = nn.Parameter(torch.tensor(0.0), requires_grad=False)

            def forward(self, norm):
                loss = torch.mean((norm - self.exp_sum_a) ** 2)
                self.exp_sum_a.mul_(self.beta).add_(norm.mean().detach(), alpha=1 - self.beta)
                self.steps.add_(1.0)
                return loss
        """,
        # A leaf made with requires_grad_(), updated under no_grad.
        """
        import torch

        def refine(s, target, lr=0.1, steps=5):
            s_batch = s.clone().float().requires_grad_(True)
            for _ in range(steps):
                loss = ((s_batch - target) ** 2).mean()
                loss.backward()
                with torch.no_grad():
                    s_batch -= lr * s_batch.grad
                s_batch.grad.zero_()
            return s_batch
        """,
        # Weights of a module the file freezes first.
        """
        from torch import nn

        def edit_neuron(model: nn.Module, layer, column, delta):
            model.requires_grad_(False)
            model.encoder.layer[layer].output.dense.weight[:, column] += delta
        """,
        # A helper only called under no_grad, and one also given plain tensors.
        """
        import torch
        from torch import nn

        def fill_sinusoids(E):
            position = torch.arange(E.shape[0]).unsqueeze(1)
            E[:, 0::2] = torch.sin(position * 0.01)

        class Embeddings(nn.Module):
            def __init__(self, n, dim):
                super().__init__()
                self.position_embeddings = nn.Embedding(n, dim)
                with torch.no_grad():
                    fill_sinusoids(self.position_embeddings.weight)
                table = torch.zeros(n, dim)
                fill_sinusoids(table)
        """,
    ]

    invalid = [
        # A helper handed the model's parameters updates them in place, outside no_grad.
        Invalid(
            """
            import torch
            from torch import nn

            def sgd(tensors, rate):
                for t in tensors:
                    t -= rate * t.grad

            def fit(m, pairs, score, rate):
                for x, y in pairs:
                    m.zero_grad()
                    score(m(x), y).backward()
                    sgd(m.parameters(), rate)

            head = nn.Linear(4, 3)
            fit(head, [(torch.randn(8, 4), torch.randint(0, 3, (8,)))], nn.CrossEntropyLoss(), 0.1)
            """,
            line=6,
        ),
        # A row of a leaf made by `requires_grad_()`, nudged in place.
        Invalid(
            """
            import torch

            def init(size):
                return torch.randn(size).requires_grad_()

            w = init((8, 1))
            w[0] *= 1.01
            """,
            line=7,
        ),
        # The helper makes the mask require grad; the next round masks it in place.
        Invalid(
            """
            import torch

            def head_importance(model, loader, head_mask):
                head_mask.requires_grad_(True)
                for x, y in loader:
                    model(x, y, head_mask=head_mask).backward()
                return head_mask.grad.abs()

            def prune(model, loader, rounds, n):
                new_mask = torch.ones(4, 8)
                for _ in range(rounds):
                    importance = head_importance(model, loader, new_mask.clone())
                    new_mask = new_mask.view(-1)
                    new_mask[importance.view(-1).argsort()[:n]] = 0.0
                    new_mask = new_mask.view(4, 8)
                    head_importance(model, loader, new_mask)
                return new_mask
            """,
            line=14,
            message="`new_mask` is a view of a leaf that requires grad",
        ),
        Invalid(
            """
            import torch

            def refine(s, target, lr=0.1, steps=5):
                s_batch = s.clone().float().requires_grad_(True)
                for _ in range(steps):
                    loss = ((s_batch - target) ** 2).mean()
                    loss.backward()
                    s_batch -= lr * s_batch.grad
                    s_batch.grad.zero_()
                return s_batch
            """,
            line=8,
            message="`s_batch` is a leaf that requires grad",
        ),
        Invalid(
            """
            from torch import nn

            def edit_neuron(model: nn.Module, layer, column, delta):
                model.encoder.layer[layer].output.dense.weight[:, column] += delta
            """,
            line=4,
            message="`model.encoder.layer[layer].output.dense.weight` is a parameter",
        ),
        Invalid(
            """
            import torch
            from torch import nn

            def fill_sinusoids(E):
                position = torch.arange(E.shape[0]).unsqueeze(1)
                E[:, 0::2] = torch.sin(position * 0.01)

            class Embeddings(nn.Module):
                def __init__(self, n, dim):
                    super().__init__()
                    self.position_embeddings = nn.Embedding(n, dim)
                    fill_sinusoids(self.position_embeddings.weight)
            """,
            line=6,
            message="`E` is a parameter",
        ),
        Invalid(
            """
            import torch

            def fit(x, y, steps=100, lr=0.1):
                w = torch.zeros(x.shape[1], requires_grad=True)
                for _ in range(steps):
                    loss = ((x @ w - y) ** 2).mean()
                    loss.backward()
                    w -= lr * w.grad
                    w.grad.zero_()
                return w
            """,
            line=8,
            column=9,
            message="`w` is a leaf that requires grad",
        ),
        Invalid(
            """
            from torch import nn

            def add_weight_noise(model: nn.Module, std=0.01):
                for p in model.parameters():
                    p.add_(std * p.new_empty(p.shape).normal_())
            """,
            line=5,
            message="`p` is a parameter",
        ),
        Invalid(
            """
            import torch
            from torch import nn

            class Scale(nn.Module):
                def __init__(self, n):
                    super().__init__()
                    self.gamma = nn.Parameter(torch.empty(n))
                    self.gamma.fill_(1.0)
            """,
            line=8,
        ),
    ]

    def finish(self) -> None:
        facts = self.facts
        candidates = None  # built on first need: most files edit no name in place
        for edit in facts.shared("inplace", InplaceEdits).edits:
            tensor = written_tensor(edit)
            if tensor is None or (isinstance(edit.node, cst.Call) and facts.values.file_functions(edit.node)):
                continue  # `helper(out=w)`: the helper's own edit is the one looked at
            if isinstance(tensor, cst.Name) and candidates is None:
                candidates = self._leaf_names()
            if isinstance(tensor, cst.Name) and tensor.value not in candidates and not self._parameter_of(tensor):
                continue  # cheap: only names ever bound to a leaf are looked at closely
            what = self._leaf_kind(tensor)
            if what is None:
                continue
            if facts.grad_mode.is_disabled(edit.node) or facts.intent.is_test_code(edit.node):
                continue
            self.report(edit.node, edit=edit.text, tensor=facts.module.code_for_node(tensor), what=what)
        # The interpreter's view, whatever the tensor is called and wherever it
        # was made: a helper handed a model's weight edits it in place.
        reported = {facts.line_of(r.node) for r in self.reports}
        for edit in facts.interpreter.leaf_edits():
            if isinstance(edit, cst.Call) and isinstance(edit.func, cst.Attribute):
                tensor = edit.func.value
            elif isinstance(edit, cst.AugAssign):
                tensor = edit.target
            elif isinstance(edit, cst.Subscript):
                tensor = edit.value
            else:
                continue
            if facts.line_of(edit) in reported or facts.grad_mode.is_disabled(edit) or facts.intent.is_test_code(edit):
                continue
            reported.add(facts.line_of(edit))
            self.report(edit, edit=facts.module.code_for_node(edit).strip(), tensor=facts.module.code_for_node(tensor), what="a leaf that requires grad")

    def _leaf_names(self) -> Set[str]:
        """Names the file binds to a parameter, a `requires_grad=True`
        factory or a `.requires_grad_()` result, flags with
        `requires_grad = True`, or iterates over `.parameters()`: with the
        parameters of functions, the only possible targets."""
        index = self.facts.index
        names: Set[str] = set()
        for assign in index.nodes(cst.Assign):
            value = assign.value
            if isinstance(value, cst.Call) and (
                any(arg.keyword is not None and arg.keyword.value == "requires_grad" for arg in value.args)
                or (dotted(value.func) or "").endswith("Parameter")
                or (isinstance(value.func, cst.Attribute) and value.func.attr.value == "requires_grad_")
            ):
                names.update(t.target.value for t in assign.targets if isinstance(t.target, cst.Name))
        for statement in (*index.nodes(cst.Assign), *index.nodes(cst.Expr)):
            flagged = grad_flag_set(statement)
            if flagged is not None:
                names.add(flagged)
        names.update(self.facts.values.flagged_by_calls())
        for loop in index.nodes(cst.For):
            if "parameters" in self.facts.module.code_for_node(loop.iter):
                names.update(n.value for n in index.descendants(loop.target, cst.Name))
                if isinstance(loop.target, cst.Name):
                    names.add(loop.target.value)
        return names

    def _parameter_of(self, name: cst.Name) -> Optional[cst.Param]:
        """The parameter `name` reads, when nothing in its function rebinds it before."""
        function = self.facts.index.scope_of(name)
        if not isinstance(function, cst.FunctionDef):
            return None
        if self.facts.values.scope(function).assignment_before(name.value, name) is not None:
            return None
        params = function.params
        return next((p for p in (*params.posonly_params, *params.params, *params.kwonly_params) if p.name.value == name.value), None)

    def _built_here(self, name: cst.Name) -> bool:
        """`conv = nn.Conv2d(...)` in this scope: its weight is a fresh trainable parameter."""
        entry = self.facts.values.scope(name).assignment_before(name.value, name)
        value = entry[2] if entry is not None else None
        return isinstance(value, cst.Call) and (self.facts.names.qualified(value.func) or "").startswith("torch.nn.")

    def _leaf_kind(self, target: cst.BaseExpression, follow_calls: bool = True) -> Optional[str]:
        """"a parameter" or "a leaf that requires grad", when `target` surely is one."""
        values = self.facts.values
        if isinstance(target, cst.Name):
            holds = values.holds(target) or self.facts.shared("loops", LoopFacts).loop_variable_holds(target)
            param = self._parameter_of(target) if follow_calls and not holds else None
            if param is not None:
                # `def fill(E): E[:, 0] = ...` called as `fill(layer.weight)`: what every call passes.
                kinds = {self._leaf_kind(arg, follow_calls=False) for arg in values.arguments_for(param)}
                return kinds.pop() if len(kinds) == 1 else None
            view = self.facts.shared("views", Views).view_origin(target)
            base = view.func.value if isinstance(view, cst.Call) and isinstance(view.func, cst.Attribute) else None
            if holds & Holds.ACTIVATION and isinstance(base, cst.Name) and base.value == target.value:
                # `m = m.view(-1); m[i] = 0`: a view of what `m` held, a leaf that requires grad.
                kind = self._leaf_kind(base, follow_calls=False)
                return f"a view of {kind}" if kind is not None else None
        elif isinstance(target, cst.Attribute) and self.facts.index.is_receiver(target.value):
            holds = values.holds(target)  # a member declared as nn.Parameter
        elif values.module_parameter(target):
            return "a parameter"  # `model.fc.weight`, `self.encoder.layer[0].dense.weight`
        elif (
            isinstance(target, cst.Attribute)
            and target.attr.value in ("weight", "bias")
            and isinstance(target.value, cst.Name)
            and values.holds(target.value) & Holds.MODEL
            and self._built_here(target.value)
        ):
            return "a parameter"  # `conv.weight` of a layer this function built
        else:
            return None
        if holds & ~(Holds.PARAM | Holds.LEAF) or not holds:
            return None  # mixed or unknown: not certain
        return "a parameter" if holds & Holds.PARAM else "a leaf that requires grad"
