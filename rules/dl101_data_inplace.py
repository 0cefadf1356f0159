from __future__ import annotations

from typing import Optional

import libcst as cst

from detachlint.analysis import Holds
from detachlint.analysis.aliases import StorageAliases
from detachlint.analysis.inplace import InplaceEdits
from detachlint.analysis.saved_tensors import may_save
from detachlint.analysis.vocabulary import NOT_VALUE_EDITS
from detachlint.rule import Invalid, Replace, Rule

_GRAD_ENABLED = Holds.ACTIVATION | Holds.LOSS
# In-place methods whose out-of-place twin (the name without `_`) takes the same arguments.
_OUT_OF_PLACE = {
    "clamp_", "clamp_min_", "clamp_max_", "clip_", "add_", "sub_", "mul_", "div_", "masked_fill_",
    "sigmoid_", "tanh_", "relu_", "abs_", "neg_", "pow_", "exp_", "log_", "sqrt_", "nan_to_num_",
}
# Reductions whose backward does not read their own result.
_RESULT_NOT_SAVED = {"sum", "mean", "add", "sub"}
_OPERATORS = {"+=": "+", "-=": "-", "*=": "*", "/=": "/"}
# Operations whose backward reads their own output: an edit of that output
# corrupts their gradient whatever reads it next.
_SAVES_OUTPUT = {"sigmoid", "tanh", "exp", "relu", "softmax", "log_softmax", "elu", "selu", "Sigmoid", "Tanh", "ReLU", "Softmax", "LogSoftmax", "ELU", "SELU"}


def _masks_to_minus_infinity(call: cst.Call) -> bool:
    """`scores.data.masked_fill_(mask, -inf)` (or a fill of -1e4 and below):
    the attention-mask idiom. Filled positions get zero weight and zero
    gradient from the softmax that follows, edited or not."""
    if call.func.attr.value != "masked_fill_" or len(call.args) != 2:  # type: ignore[attr-defined]
        return False
    value = call.args[1].value
    text = cst.Module([]).code_for_node(value).replace(" ", "")
    if "inf" in text and text.startswith("-"):
        return True
    try:
        return float(text) <= -1e4
    except ValueError:
        return False


def _data_owner(node: cst.BaseExpression) -> Optional[cst.Name]:
    """`x` in `x.data`, `x.data[i]` and `x[i].data` (an element of a list
    of tensors); None for anything else."""
    if isinstance(node, cst.Subscript):
        node = node.value
    if not isinstance(node, cst.Attribute) or node.attr.value != "data":
        return None
    value = node.value
    if isinstance(value, cst.Subscript) and isinstance(value.value, cst.Name):
        return value.value
    return value if isinstance(value, cst.Name) else None


class DataInplace(Rule):
    """In-place edit through `.data` of a tensor autograd still uses.

    ## What it does
    Flags in-place edits made through `.data` (`x.data.clamp_(...)`,
    `x.data[i] = v`, `x.data += v`, `x.data.copy_(y)`) of an *activation*: a
    tensor computed by a module or a differentiable operation, which later
    code still uses. Also flags such an edit of a parameter by a value that
    autograd computed from that parameter itself, when the function goes on
    to use the parameter (`weight.data /= sigma` with `sigma` from a power
    iteration on `weight`, then `return weight` as the layer's weight).

    ## Why is this bad?
    `.data` hands out the same storage with autograd's bookkeeping switched
    off. The edit does not bump the tensor's version counter, so when the
    tensor was saved for backward, backward runs on the edited values and
    the gradients are silently wrong. The same edit through `.detach()`
    raises "one of the variables needed for gradient computation has been
    modified by an inplace operation" instead.

    ## Example
    ```python
    import torch

    prob = torch.sigmoid(model(x))
    prob.data.clamp_(0.05, 0.95)
    loss = criterion(prob, y)
    ```

    Use instead:
    ```python
    import torch

    prob = torch.sigmoid(model(x))
    prob = prob.clamp(0.05, 0.95)
    loss = criterion(prob, y)
    ```

    ## Not flagged
    - Edits of parameters and buffers: weight init in `__init__`,
      `reset_parameters` or `_init_weights`, weight clipping, EMA and
      momentum updates, `p.data.add_(...)` in an optimizer's `step`.
    - A parameter rescaled by a value computed under `torch.no_grad()`
      (a deliberate projection: no gradient was meant to flow through it).
    - Edits of `.grad.data` (gradient clipping and scaling).
    - Edits of leaf inputs between steps, such as an adversarial `delta`
      updated after `backward()`.
    - Anything under `torch.no_grad()` or `torch.inference_mode()`, or in a
      function decorated with them.
    - An activation that nothing reads after the edit.
    - The attention-mask idiom, `scores.data.masked_fill_(mask, -inf)` (or
      a fill of -1e4 and below) on scores whose producer does not keep its
      output for backward: the softmax that follows gives the filled
      positions zero weight and zero gradient, edited or not.

    ## Fix safety
    The fix rewrites the edit out of place, where autograd records it:
    `prob.data.clamp_(a, b)` becomes `prob = prob.clamp(a, b)` and
    `x.data += v` becomes `x = x + v`. It is unsafe: it changes the
    gradients (which is the point), and values computed from the old `prob`
    before the edit no longer see it, so it needs a review. Edits with no
    out-of-place twin (`copy_`, `zero_`, `x.data[i] = v`) get no fix.

    ## Verification
    The probe runs the enclosing function three ways: as written, with the
    same edit made through `.detach()` (whose in-place change autograd's
    version check sees) and with the edit made visible to autograd on a
    copy. Confirmed when the detached edit makes backward raise "modified by
    an inplace operation" (the `.data` edit overwrote a tensor saved for
    backward) or when the gradients differ from those of the visible edit.
    Refuted when neither happens; an edit that changes no gradient at the
    reproduction's inputs (a clamp no value reaches) stays inconclusive.

    ## References
    - PyTorch docs, "Autograd mechanics": in-place operations and version counters.
    - PyTorch 0.4 migration guide: `.data` versus `.detach()`.
    """

    code = "DL101"
    name = "data-inplace"
    fix_title = "Make the edit out of place, where autograd sees it"
    message = "`{edit}`{via} changes `{name}` behind autograd's back: backward uses the edited values and its gradients come out silently wrong"
    harm = "wrong-gradients"
    default_enabled = True

    valid = [
        # The product with a number saves only the number: backward never reads `w`'s values.
        """
        import torch

        w = torch.ones(3, requires_grad=True)
        scaled = 2 * w
        w.data *= 100
        scaled.sum().backward()
        """,
        # A projection: the scale is computed under no_grad on purpose.
        """
        import torch
        from torch.nn.functional import normalize

        def compute_weight(module, u):
            weight = module._parameters["weight_orig"]
            with torch.no_grad():
                v = normalize(torch.mv(weight.t(), u), dim=0)
                u = normalize(torch.mv(weight, v), dim=0)
                sigma = torch.dot(u, torch.mv(weight, v))
            weight.data /= sigma
            return weight, u
        """,
        # Weight init: parameters, not activations.
        """
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 2)
                self.fc.weight.data.normal_(0.0, 0.02)
                self.fc.bias.data.zero_()
        """,
        # A manual optimizer step edits parameters.
        """
        import torch

        class SGD(torch.optim.Optimizer):
            def step(self):
                for group in self.param_groups:
                    for p in group["params"]:
                        p.data.add_(p.grad.data, alpha=-group["lr"])
        """,
        # Gradient clipping through .grad.data.
        """
        import torch

        def train_step(model, x, y, criterion, optimizer):
            loss = criterion(model(x), y)
            loss.backward()
            for p in model.parameters():
                p.grad.data.clamp_(-1, 1)
            optimizer.step()
        """,
        # Adversarial perturbation: a leaf, updated after backward.
        """
        import torch

        def pgd(model, x, y, criterion, eps=0.03):
            delta = torch.zeros_like(x, requires_grad=True)
            for _ in range(10):
                loss = criterion(model(x + delta), y)
                loss.backward()
                delta.data.add_(0.01 * delta.grad.sign())
                delta.data.clamp_(-eps, eps)
            return delta.detach()
        """,
        # Under no_grad: nothing is recorded, nothing is saved.
        """
        import torch

        @torch.no_grad()
        def postprocess(model, x):
            out = model(x)
            out.data.clamp_(0, 1)
            return out
        """,
        # EMA update of a teacher's parameters.
        """
        import torch

        def update_teacher(student, teacher, m=0.99):
            for ps, pt in zip(student.parameters(), teacher.parameters()):
                pt.data.mul_(m).add_(ps.data, alpha=1 - m)
        """,
        # Nothing reads the activation after the edit.
        """
        import torch

        def log_probs(model, x, log):
            out = model(x)
            log(out.detach())
            out.data.zero_()
        """,
        """
        import torch
        from torch import nn

        class Attention(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.score = nn.Linear(dim, 1)
                self.drop = nn.Dropout(0.1)

            def forward(self, x, mask):
                scores = self.drop(self.score(x).squeeze(-1))
                scores.data.masked_fill_(~mask, -float("inf"))
                return torch.softmax(scores, dim=-1)
        """,
    ]

    invalid = [
        # A spectral-norm pre-hook: the division by sigma is hidden from autograd.
        Invalid(
            """
            import torch
            from torch.nn.functional import normalize

            def compute_weight(module, u):
                weight = module._parameters["weight_orig"]
                weight_mat = weight.view(weight.size(0), -1)
                v = normalize(torch.matmul(weight_mat.t(), u), dim=0)
                u = normalize(torch.matmul(weight_mat, v), dim=0)
                sigma = torch.dot(u, torch.matmul(weight_mat, v))
                weight.data /= sigma
                return weight, u
            """,
            line=10,
            message="(by `sigma`, which autograd computed from `weight` itself)",
            fixed="""
            import torch
            from torch.nn.functional import normalize

            def compute_weight(module, u):
                weight = module._parameters["weight_orig"]
                weight_mat = weight.view(weight.size(0), -1)
                v = normalize(torch.matmul(weight_mat.t(), u), dim=0)
                u = normalize(torch.matmul(weight_mat, v), dim=0)
                sigma = torch.dot(u, torch.matmul(weight_mat, v))
                weight = weight / sigma
                return weight, u
            """,
        ),
        Invalid(
            """
            import torch

            def train_step(model, x, y, criterion):
                prob = torch.sigmoid(model(x))
                prob.data.clamp_(0.05, 0.95)
                loss = criterion(prob, y)
                loss.backward()
            """,
            line=5,
            column=5,
            message="`prob.data.clamp_()` changes `prob`",
            fixed="""
            import torch

            def train_step(model, x, y, criterion):
                prob = torch.sigmoid(model(x))
                prob = prob.clamp(0.05, 0.95)
                loss = criterion(prob, y)
                loss.backward()
            """,
        ),
        Invalid(
            """
            from torch import nn

            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 8)

                def forward(self, x):
                    h = self.fc(x)
                    y = h.sigmoid()
                    h.data[h.data < 0] = 0
                    return y * h
            """,
            line=11,
        ),
        Invalid(
            """
            import torch.nn.functional as F

            def forward_step(net, x):
                logits = net(x)
                logits.data += 1.0
                return F.log_softmax(logits, dim=-1)
            """,
            line=5,
            message="`logits.data += ...`",
            fixed="""
            import torch.nn.functional as F

            def forward_step(net, x):
                logits = net(x)
                logits = logits + 1.0
                return F.log_softmax(logits, dim=-1)
            """,
        ),
        Invalid(
            """
            import torch

            def scaled_step(model, x):
                out = torch.tanh(model(x))
                out[0].data *= 3.0
                return (out * out).sum()
            """,
            line=5,
            message="`out[0].data *= ...`",
        ),
        Invalid(
            """
            import torch as th

            def step(model, batch, target):
                out = model(batch)
                scores = th.tanh(out)
                out.data.copy_(target)
                return scores.sum()
            """,
            line=6,
        ),
        Invalid(
            """
            import torch

            def gate(model, x, mask):
                gates = torch.sigmoid(model(x))
                gates.data.masked_fill_(mask, -1e9)
                return torch.softmax(gates, dim=-1)
            """,
            line=5,
        ),
    ]

    def visit_Call(self, node: cst.Call) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute):
            return
        method = func.attr.value
        if not method.endswith("_") or method.startswith("_") or method in NOT_VALUE_EDITS:
            return
        owner = _data_owner(func.value)
        if owner is not None and not isinstance(func.value, cst.Subscript):
            fix = None
            element = isinstance(func.value.value, cst.Subscript)  # type: ignore[attr-defined]
            if method in _OUT_OF_PLACE and not element:
                call = node.with_changes(func=cst.Attribute(cst.Name(owner.value), cst.Name(method[:-1])))
                fix = self._rebind(node, owner.value, call)
            text = self.facts.module.code_for_node(func.value.value)  # type: ignore[attr-defined]
            if _masks_to_minus_infinity(node) and not self._output_saved_by_producer(owner):
                return
            self._check(node, owner, f"{text}.data.{method}()", fix)

    def _output_saved_by_producer(self, owner: cst.Name) -> bool:
        """Whether the value was made by an operation whose backward reads its output."""
        for _, value in self.facts.values.scope(owner).reaching(owner):
            if value is None:
                return True  # unknown: keep the finding
            for call in [value, *self.facts.index.descendants(value, cst.Call)]:
                if isinstance(call, cst.Call):
                    func = call.func
                    name = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else ""
                    if name in _SAVES_OUTPUT:
                        return True
        return False

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            if isinstance(target.target, cst.Subscript):
                owner = _data_owner(target.target)
                if owner is not None:
                    self._check(node, owner, f"{owner.value}.data[...] = ...")
        self._check_alias(node)

    def _check_alias(self, node: cst.Assign) -> None:
        """`c = out.data` then `c.zero_()`: the edit reaches `out` unseen."""
        facts = self.facts
        aliases = facts.shared("aliases", StorageAliases)
        found = aliases.detached_alias(node)
        if found is None or found.through != "data" or found.alias == found.source.value:
            return
        scope = facts.index.scope_of(node)
        for edit in facts.shared("inplace", InplaceEdits).edits_of(found.alias, scope):
            if not facts.index.before(node, edit.node) or aliases.binding(found.alias, edit.node) is not node:
                continue
            if edit.text.split(".", 1)[-1].split("(", 1)[0] in NOT_VALUE_EDITS:
                continue
            if self._only_backward_root(found.source, node):
                return  # backward from `out` itself never reads its value
            via = f" (`{found.alias}` is `{found.source.value}.data`)"
            if self._check(edit.node, found.source, edit.text, via=via):
                return

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        owner = _data_owner(node.target)
        if owner is not None:
            operator = self.facts.module.code_for_node(node.operator).strip()
            subscript = "[...]" if isinstance(node.target, cst.Subscript) else ""
            # `x[i].data *= k` edits one element of `x` (or of a list named `x`): named as written, never rebound whole.
            element = isinstance(node.target, cst.Attribute) and isinstance(node.target.value, cst.Subscript)
            owner_text = self.facts.module.code_for_node(node.target.value) if element else owner.value
            fix = None
            if not subscript and not element and operator in _OPERATORS:
                value = cst.BinaryOperation(
                    cst.Name(owner.value),
                    cst.parse_expression(f"a {_OPERATORS[operator]} b").operator,
                    node.value,
                )
                fix = self._rebind(node, owner.value, value)
            self._check(node, owner, f"{owner_text}.data{subscript} {operator} ...", fix)

    def _rebind(self, edit: cst.CSTNode, name: str, value: cst.BaseExpression) -> Optional[Replace]:
        """`name = value` in place of the statement that holds only the edit."""
        statement = self.facts.index.parent(edit)
        if isinstance(edit, cst.Call):
            expression, statement = statement, self.facts.index.parent(statement)
            if not isinstance(expression, cst.Expr):
                return None
            edit = expression
        if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
            return None
        assign = cst.Assign(targets=[cst.AssignTarget(cst.Name(name))], value=value)
        return Replace(edit, assign, unsafe=True)

    def _element_index(self, edit: cst.CSTNode, name: str) -> Optional[int]:
        """`k` when the edit goes through `name[k].data`."""
        for node in self.facts.index.descendants(edit, cst.Subscript):
            if (
                isinstance(node.value, cst.Name)
                and node.value.value == name
                and len(node.slice) == 1
                and isinstance(node.slice[0].slice, cst.Index)
                and isinstance(node.slice[0].slice.value, cst.Integer)
            ):
                return int(node.slice[0].slice.value.value)
        return None

    def _only_backward_root(self, source: cst.Name, at: cst.CSTNode) -> bool:
        """`out = a.sigmoid().sum()`, later only `out.backward()`: the edit
        changes a value no backward function saved."""
        facts = self.facts
        scope = facts.values.scope(at)
        entry = scope.assignment_before(source.value, source)
        value = entry[2] if entry is not None else None
        if not isinstance(value, cst.Call) or not isinstance(value.func, cst.Attribute):
            return False
        if value.func.attr.value not in _RESULT_NOT_SAVED:
            return False
        reads = scope.reads_after(source.value, facts.index.parent(at) or at)
        for read in reads:
            parent = facts.index.parent(read)
            call = facts.index.parent(parent) if parent is not None else None
            is_root = isinstance(parent, cst.Attribute) and parent.attr.value == "backward" and isinstance(call, cst.Call)
            if not is_root:
                return False
        return bool(reads)

    def _check(self, edit: cst.CSTNode, owner: cst.Name, text: str, fix: Optional[Replace] = None, via: str = "") -> bool:
        facts = self.facts
        if facts.grad_mode.is_disabled(edit):
            return False
        holds = facts.values.holds(owner)
        statement = self._statement(edit)
        scope = facts.values.scope(edit)
        name = owner.value
        if holds & Holds.PARAM and not holds & Holds.DETACHED:
            operand = self._own_graph_operand(edit, name, statement, scope)
            if operand is not None:
                via = f" (by `{operand}`, which autograd computed from `{name}` itself)"
                self.report(edit, fix=fix, edit=text, name=name, via=via)
                return True
        if holds & (Holds.DETACHED | Holds.PARAM):
            return False
        if not holds & _GRAD_ENABLED or holds & Holds.LEAF:
            # A leaf, or a tensor the file says nothing about: harmful when
            # edited between a forward that used it and that forward's
            # backward, or when it is backpropagated after the edit.
            if self._backpropagated_across(name, statement) or (
                not holds & Holds.LEAF and via and facts.values.backpropagated_after(owner, statement)
            ):
                self.report(edit, fix=fix, edit=text, name=name, via=via)
                return True
            passed = None if holds & Holds.LEAF else self._activation_passed(owner, edit)
            if passed is not None and self._used_later(name, statement, scope):
                self.report(edit, fix=fix, edit=text, name=name, via=f" (`{name}` holds the activations passed on line {passed})")
                return True
            return False
        if self._used_later(name, statement, scope):
            self.report(edit, fix=fix, edit=text, name=name, via=via)
            return True
        return False

    def _own_graph_operand(self, edit: cst.CSTNode, name: str, statement: cst.CSTNode, scope) -> Optional[str]:
        """`weight.data /= sigma` with `sigma` computed, autograd on, from
        `weight` itself, and `weight` used after the edit (returned as the
        layer's weight): the author wanted the differentiable `weight /
        sigma`, and the gradient through `sigma` is dropped. The operand's
        name, or None."""
        if isinstance(edit, cst.AugAssign):
            operands = [edit.value]
        elif isinstance(edit, cst.Call):
            operands = [arg.value for arg in edit.args]
        else:
            return None
        if not scope.reads_after(name, statement):
            return None
        derived = set(scope.derived_names(name, statement))
        for operand in operands:
            if not isinstance(operand, cst.Name) or operand.value not in derived:
                continue
            held = self.facts.values.holds(operand)
            if held & _GRAD_ENABLED and not held & Holds.DETACHED:
                return operand.value
        return None

    @staticmethod
    def _used_later(name: str, statement: cst.CSTNode, scope) -> bool:
        return bool(scope.reads_after(name, statement)) or any(
            scope.reads_after(derived, statement) for derived in scope.derived_names(name, statement)
        )

    def _activation_passed(self, owner: cst.Name, edit: cst.CSTNode) -> Optional[int]:
        """The line of a call, in this file and with autograd on, that passes
        for the parameter `owner` names an activation that autograd may have
        saved before the edit: one an operation already consumed before the
        call (`self.postnet(mel)` then `self.parse_output([mel, ...])`), or a
        module's output bound on its own (`x = net(z)`; its last layer may
        have saved it). For `owner[k].data`, the k-th element of a passed list."""
        facts = self.facts
        function = facts.index.scope_of(owner)
        if not isinstance(function, cst.FunctionDef):
            return None
        params = [p.name.value for p in function.params.params]
        if owner.value not in params:
            return None
        element_index = self._element_index(edit, owner.value)
        for site in facts.grad_mode.call_sites(function):
            if facts.grad_mode.is_disabled(site):
                continue
            bound = isinstance(site.func, cst.Attribute) and params[0] == facts.index.instance_param(function)  # `self.f(...)`
            position = params.index(owner.value) - (1 if bound else 0)
            argument = None
            for i, arg in enumerate(site.args):
                if arg.keyword is not None and arg.keyword.value == owner.value:
                    argument = arg.value
                elif arg.keyword is None and not arg.star and i == position:
                    argument = arg.value
            if argument is None:
                continue
            if isinstance(argument, (cst.List, cst.Tuple)):
                elements = [e.value for e in argument.elements]
                if element_index is not None:
                    elements = elements[element_index : element_index + 1]
            else:
                elements = [argument]
            for element in elements:
                held = facts.values.holds(element)
                if not held & (Holds.ACTIVATION | Holds.LOSS) or held & (Holds.DETACHED | Holds.PARAM):
                    continue
                if isinstance(element, cst.Name) and (
                    self._consumed_before(element, site) or self._module_output(element)
                ):
                    return facts.line_of(site)
        return None

    def _consumed_before(self, name: cst.Name, site: cst.Call) -> bool:
        """Whether an operation read `name`'s value between its binding and `site`."""
        facts = self.facts
        scope = facts.values.scope(name)
        binding = scope.assignment_before(name.value, name)
        start = facts.index.order[binding[1]] if binding is not None else -1
        for read in scope.reads.get(name.value, ()):
            order = facts.index.order[read]
            if start < order < facts.index.order[site] and not facts.index.is_inside(read, site):
                if scope.assignment_before(name.value, read) == binding:
                    return True
        return False

    def _module_output(self, name: cst.Name) -> bool:
        """`x = net(z)`: the name alone holds a module's output."""
        facts = self.facts
        binding = facts.values.scope(name).assignment_before(name.value, name)
        if binding is None or not isinstance(binding[1], cst.Assign) or binding[2] is None:
            return False
        single = all(isinstance(t.target, cst.Name) for t in binding[1].targets)
        value = binding[2]
        return single and isinstance(value, cst.Call) and bool(facts.values.holds(value.func) & Holds.MODEL)

    def _backpropagated_across(self, name: str, statement: cst.CSTNode) -> bool:
        """Whether a value computed from `name` before `statement` is
        backpropagated after it: backward then reads the edited values."""
        facts = self.facts
        scope = facts.values.scope(statement)
        index = facts.index
        for derived in scope.derived_names(name, statement):
            entry = scope.assignment_before(derived, statement)
            if entry is None:
                continue
            if entry[2] is None or not may_save(entry[2], name, index):
                continue
            for backward in facts.values.backwards_from(entry[2]):
                if index.before(statement, backward):
                    return True
        return False

    def _statement(self, node: cst.CSTNode) -> cst.CSTNode:
        for ancestor in self.facts.index.ancestors(node):
            if isinstance(ancestor, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return ancestor
        return node
